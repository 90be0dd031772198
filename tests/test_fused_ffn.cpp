// fused_ffn_token (one token's sparse FFN in one pass) against the two-pass operators it
// replaces in decode (gather_matmat, the activation, axpy_rows): bit-identical for every type,
// kernel variant, thread count and weight layout; and axpy_rows' bucketed sums depend only on
// the active neurons.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/fused_ffn.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/sparse_ops.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

enum class Act { ReGLU, SiLU, ReLU };  // ReLU: ungated, h = max(up, 0)

void activate(const void* ctx, const float* gate, const float* up, float* h, int64_t n) {
  const Act act = *static_cast<const Act*>(ctx);
  for (int64_t i = 0; i < n; ++i) {
    if (act == Act::ReGLU) h[i] = gate[i] > 0.0f ? gate[i] * up[i] : 0.0f;
    if (act == Act::SiLU) h[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    if (act == Act::ReLU) h[i] = std::max(up[i], 0.0f);
  }
}

// gate, up and down_t of n_ff neurons (n_embd each), stored separately or bundled (neuron i's
// three rows back to back, the views' stride three rows), from the same random values.
struct FfnWeights {
  std::vector<uint8_t> bytes;
  MatrixView gate, up, down;
};

FfnWeights make_weights(DType type, int64_t n_ff, int64_t n_embd, bool bundled, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const uint64_t rb = row_bytes(type, n_embd);
  FfnWeights w;
  w.bytes.resize(3 * rb * n_ff);
  std::vector<float> row(n_embd);
  for (int m = 0; m < 3; ++m)
    for (int64_t i = 0; i < n_ff; ++i) {
      for (auto& v : row) v = dist(rng);
      const uint64_t at = bundled ? (3 * i + m) * rb : (m * n_ff + i) * rb;
      quantize_row(type, row.data(), w.bytes.data() + at, n_embd);
    }
  const uint64_t stride = bundled ? 3 * rb : rb;
  auto view = [&](int m) {
    return MatrixView{type, w.bytes.data() + (bundled ? m * rb : m * n_ff * rb), n_embd, n_ff,
                      stride};
  };
  w.gate = view(0), w.up = view(1), w.down = view(2);
  return w;
}

std::vector<int32_t> random_ids(int64_t n_ff, double p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution pick(p);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n_ff; ++i)
    if (pick(rng)) ids.push_back(i);
  return ids;
}

struct Result {
  std::vector<float> out, h;
  uint64_t nonzero = 0;
};

// The two-pass reference: gather gate and up, activate, axpy the non-zero ones.
Result two_pass(const CpuKernels& k, const FfnWeights& w, bool gated, Act act,
                const std::vector<int32_t>& ids, const PreparedInput& x, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> g(n), u(n);
  const GatherJob jobs[2] = {{&w.up, u.data(), n}, {&w.gate, g.data(), n}};
  gather_matmat(k, std::span(jobs, gated ? 2 : 1), ids, std::span(&x, 1), pool);
  Result r;
  r.h.resize(n);
  activate(&act, g.data(), u.data(), r.h.data(), n);
  for (float v : r.h) r.nonzero += v != 0.0f;
  r.out.resize(w.down.cols);
  axpy_rows(k, w.down, ids, r.h.data(), n, 1, r.out.data(), w.down.cols, pool);
  return r;
}

Result fused(const CpuKernels& k, const FfnWeights& w, bool gated, Act act,
             const std::vector<int32_t>& rows, const PreparedInput& x, ThreadPool& pool,
             const std::vector<int32_t>& neurons = {}) {
  Result r;
  r.h.assign(rows.size(), -1.0f);
  r.out.assign(w.down.cols, -1.0f);
  const FusedFfnWeights fw{gated ? &w.gate : nullptr, &w.up, &w.down};
  const FusedFfnActivation fa{activate, &act, act == Act::ReGLU};
  r.nonzero = fused_ffn_token(k, fw, rows, x, fa, r.h.data(), r.out.data(), pool, neurons);
  return r;
}

TEST(FusedFfn, EqualsGatherActivationAxpyBitForBit) {
  const int64_t n_embd = 256, n_ff = 1100;  // several buckets of kAxpyBucket neurons
  std::vector<float> xs(n_embd);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : xs) v = dist(rng);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
    for (bool bundled : {false, true}) {
      const FfnWeights w = make_weights(type, n_ff, n_embd, bundled, 17);
      for (const CpuKernels* k : supported_kernels()) {
        PreparedInput x;
        x.prepare(*k, xs.data(), n_embd, needs_q8_input(type));
        for (Act act : {Act::ReGLU, Act::SiLU, Act::ReLU})
          for (double p : {0.03, 0.15, 1.0}) {
            const bool gated = act != Act::ReLU;
            const auto ids = random_ids(n_ff, p, 5);
            ThreadPool one(1);
            const Result ref = two_pass(*k, w, gated, act, ids, x, one);
            ASSERT_GT(ref.nonzero, 0u);
            for (int threads : {1, 2, 3}) {
              ThreadPool pool(threads);
              const Result got = fused(*k, w, gated, act, ids, x, pool);
              const std::string what = std::string(dtype_name(type)) + " " + k->name +
                                       (bundled ? " bundled" : "") + " act " +
                                       std::to_string(static_cast<int>(act)) + " p " +
                                       std::to_string(p) + " threads " + std::to_string(threads);
              ASSERT_EQ(got.out, ref.out) << what;
              ASSERT_EQ(got.h, ref.h) << what;
              ASSERT_EQ(got.nonzero, ref.nonzero) << what;
            }
          }
      }
    }
}

TEST(FusedFfn, RowsAddressedThroughSlotsGiveTheSameResult) {
  // A neuron cache stores neuron ids[k] in slot rows[k]: the same sums when the neuron ids are
  // passed along, for the fused and the two-pass operator alike.
  const int64_t n_embd = 128, n_ff = 900;
  const FfnWeights w = make_weights(DType::Q4_0, n_ff, n_embd, true, 23);
  const auto ids = random_ids(n_ff, 0.2, 8);
  std::vector<int32_t> slot_of(n_ff);
  std::iota(slot_of.begin(), slot_of.end(), 0);
  std::shuffle(slot_of.begin(), slot_of.end(), std::mt19937(1));
  // Slot s holds neuron perm^-1(s): a copy of the weights rearranged by slot.
  FfnWeights cache = w;
  const uint64_t bundle = w.gate.row_bytes;
  for (int32_t i = 0; i < n_ff; ++i)
    std::copy_n(w.bytes.data() + i * bundle, bundle, cache.bytes.data() + slot_of[i] * bundle);
  cache.gate.data = cache.bytes.data(), cache.up.data = cache.bytes.data() + bundle / 3;
  cache.down.data = cache.bytes.data() + 2 * bundle / 3;
  std::vector<int32_t> slots;
  for (int32_t i : ids) slots.push_back(slot_of[i]);
  std::vector<float> xs(n_embd, 0.25f);
  for (int64_t j = 0; j < n_embd; j += 3) xs[j] = -0.5f;
  const CpuKernels& k = best_kernels();
  PreparedInput x;
  x.prepare(k, xs.data(), n_embd, true);
  ThreadPool pool(2);
  const Result ref = fused(k, w, true, Act::ReGLU, ids, x, pool);
  EXPECT_EQ(fused(k, cache, true, Act::ReGLU, slots, x, pool, ids).out, ref.out);
  std::vector<float> out(n_embd);
  axpy_rows(k, cache.down, slots, ref.h.data(), ref.h.size(), 1, out.data(), n_embd, pool, ids);
  EXPECT_EQ(out, ref.out);
}

TEST(FusedFfn, AxpySumDependsOnlyOnTheActiveNeurons) {
  // The same active neurons and coefficients inside a short list, inside the list of every
  // neuron (zeros elsewhere), and as one token of a batch: the same sums, bit for bit.
  const int64_t n_embd = 192, n_ff = 1000;
  const FfnWeights w = make_weights(DType::Q8_0, n_ff, n_embd, false, 29);
  const auto ids = random_ids(n_ff, 0.1, 4);
  std::vector<float> coef(ids.size());
  for (size_t i = 0; i < coef.size(); ++i) coef[i] = i % 5 == 0 ? 0.0f : 0.1f * (i % 7) - 0.3f;
  std::vector<int32_t> all(n_ff);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> all_coef(n_ff, 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) all_coef[ids[i]] = coef[i];
  const CpuKernels& k = best_kernels();
  ThreadPool pool(2);
  std::vector<float> a(n_embd), b(n_embd), batch(2 * n_embd);
  axpy_rows(k, w.down, ids, coef.data(), ids.size(), 1, a.data(), n_embd, pool);
  axpy_rows(k, w.down, all, all_coef.data(), n_ff, 1, b.data(), n_embd, pool);
  EXPECT_EQ(a, b);
  // Token 1 of a batch over every neuron, token 0 using other neurons.
  std::vector<float> c2(2 * n_ff, 0.0f);
  for (int64_t i = 0; i < n_ff; i += 3) c2[i] = 0.5f;
  std::copy(all_coef.begin(), all_coef.end(), c2.begin() + n_ff);
  axpy_rows(k, w.down, all, c2.data(), n_ff, 2, batch.data(), n_embd, pool);
  EXPECT_EQ(std::vector<float>(batch.begin() + n_embd, batch.end()), a);
}

TEST(ThreadPool, WeightedSplitCoversEveryItemOnceAndBalancesWeight) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (const std::vector<int64_t>& weights :
         {std::vector<int64_t>{5}, std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1},
          std::vector<int64_t>{100, 1, 1, 1, 1, 1, 1, 1}, std::vector<int64_t>{0, 0, 3, 0, 9, 2},
          std::vector<int64_t>{0, 0}}) {
      std::vector<int64_t> cumulative;
      int64_t total = 0;
      for (int64_t v : weights) cumulative.push_back(total += v);
      std::vector<int> hits(weights.size(), 0);
      std::vector<int64_t> share(threads, 0);
      pool.parallel_for_weighted(cumulative, [&](int64_t i0, int64_t i1, int t) {
        for (int64_t i = i0; i < i1; ++i) {
          ++hits[i];  // disjoint ranges: no two threads touch the same entry
          share[t] += weights[i];
        }
      });
      for (int h : hits) ASSERT_EQ(h, 1) << threads;
      // No thread holds more than its share plus one item's weight.
      const int64_t biggest = *std::max_element(weights.begin(), weights.end());
      for (int64_t s : share) EXPECT_LE(s, total / threads + biggest) << threads;
    }
  }
}

}  // namespace
}  // namespace strata
