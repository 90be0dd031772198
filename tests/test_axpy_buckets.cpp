// axpy_rows' bucketed sums: they depend only on a token's active neurons and coefficients (not
// on the rest of the list, the batch or the thread count), and rows addressed through neuron
// cache slots give the RAM result; the weighted thread split they run on.
#include <gtest/gtest.h>

#include <mutex>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/sparse_ops.h"
#include "core/thread_pool.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

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

TEST(AxpyBuckets, RowsAddressedThroughSlotsGiveTheRamResult) {
  // A neuron cache stores neuron ids[k] in slot slots[k] (bundles: gate, up, down_t rows back
  // to back): with the neuron ids passed along, the same sums as the weights in RAM.
  const int64_t n_embd = 128, n_ff = 900;
  const FfnWeights w = make_weights(DType::Q4_0, n_ff, n_embd, true, 23);
  const auto ids = random_ids(n_ff, 0.2, 8);
  std::vector<float> coef(ids.size());
  for (size_t i = 0; i < coef.size(); ++i) coef[i] = i % 4 == 0 ? 0.0f : 0.05f * (i % 9) - 0.2f;
  std::vector<int32_t> slot_of(n_ff);
  std::iota(slot_of.begin(), slot_of.end(), 0);
  std::shuffle(slot_of.begin(), slot_of.end(), std::mt19937(1));
  FfnWeights cache = w;  // the bundles rearranged by slot
  const uint64_t bundle = w.gate.row_bytes;
  for (int32_t i = 0; i < n_ff; ++i)
    std::copy_n(w.bytes.data() + i * bundle, bundle, cache.bytes.data() + slot_of[i] * bundle);
  cache.down.data = cache.bytes.data() + 2 * bundle / 3;
  std::vector<int32_t> slots;
  for (int32_t i : ids) slots.push_back(slot_of[i]);
  const CpuKernels& k = best_kernels();
  ThreadPool pool(2);
  std::vector<float> ref(n_embd), out(n_embd);
  axpy_rows(k, w.down, ids, coef.data(), coef.size(), 1, ref.data(), n_embd, pool);
  axpy_rows(k, cache.down, slots, coef.data(), coef.size(), 1, out.data(), n_embd, pool, ids);
  EXPECT_EQ(out, ref);
}

TEST(AxpyBuckets, SumDependsOnlyOnTheActiveNeurons) {
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
      std::vector<int64_t> chunk_weights;
      std::mutex m;
      pool.parallel_for_weighted(cumulative, [&](int64_t i0, int64_t i1, int) {
        int64_t w = 0;
        for (int64_t i = i0; i < i1; ++i) {
          ++hits[i];  // disjoint ranges: no two threads touch the same entry
          w += weights[i];
        }
        std::lock_guard lock(m);
        chunk_weights.push_back(w);
      });
      for (int h : hits) ASSERT_EQ(h, 1) << threads;
      // No chunk (threads claim them as they go) holds more than its share plus one item's.
      const auto n = static_cast<int64_t>(weights.size());
      const int64_t chunks = threads == 1 ? 1 : std::min<int64_t>(n, std::min<int64_t>(threads, n) * 4);
      const int64_t biggest = *std::max_element(weights.begin(), weights.end());
      for (int64_t w : chunk_weights) EXPECT_LE(w, (total + chunks - 1) / chunks + biggest) << threads;
    }
  }
}

}  // namespace
}  // namespace strata
