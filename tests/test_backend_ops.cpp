// Every op of every available backend (backends/registry.h) against the scalar reference
// (backends/reference_ops.h), for every weight type and layout, with edge shapes: rows not a
// multiple of 16, one token and a 64-token batch, empty and full neuron lists. Tolerances are
// relative to the sum of |terms| of each output (what rounding can move): 1e-5 for float
// weights and for the axpy, 1e-4 for F16/BF16 products (f32 accumulation), 1e-2 for Q8_0/Q4_0
// and K-quant products, whose activations the backend quantizes to Q8_0 blocks or Q8_K
// super-blocks (the reference does not). K-quant rows are whole super-blocks (256 values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/refdev/reference_device.h"
#include "backends/reference_ops.h"
#include "backends/registry.h"
#include "core/error.h"
#include "device_memory.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"
#include "tensor/kquants.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

Weights random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed, bool interleave) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Weights w;
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(cols));
  w.bytes.resize(rb * static_cast<uint64_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = d(rng);
    quantize_row(type, row.data(), w.bytes.data() + rb * static_cast<uint64_t>(r), cols);
  }
  w.view = MatrixView{type, w.bytes.data(), cols, rows, rb};
  if (interleave) {
    interleave_rows16(type, w.bytes.data(), rows, cols);
    w.view.layout = Layout::Interleaved16;
  }
  return w;
}

std::vector<float> random_rows(int64_t n, int64_t dim, uint32_t seed, double zeros = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x(static_cast<size_t>(n * dim));
  for (float& v : x) v = u(rng) < zeros ? 0.0f : d(rng);
  return x;
}

double product_tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 1e-5;
    case DType::F16:
    case DType::BF16:
      return 1e-4;
    default:
      return 1e-2;
  }
}

// The CUDA backends multiply the activations as they are (f32), so every weight type's products
// are the reference's within f32 rounding; batches above 8 tokens go through a GEMM on f16
// activations and f16 weights (2^-11 relative each).
double product_tolerance(DType t, const std::string& backend, int64_t n, bool gemm_path) {
  if (!backend.starts_with("cuda")) return product_tolerance(t);
  return gemm_path && n > 8 ? 2e-3 : 1e-5;
}

// Sum over i of |w_i x_i|: the scale of the rounding in one product.
double magnitude(const MatrixView& w, int64_t r, const float* x) {
  const std::vector<float> row = reference::weight_row(w, r);
  double m = 0;
  for (size_t i = 0; i < row.size(); ++i) m += std::abs(double{row[i]} * x[i]);
  return m;
}

struct Case {
  DType type;
  bool interleaved;
};

std::vector<Case> product_cases() {
  return {{DType::F32, false},  {DType::F16, false},  {DType::BF16, false}, {DType::Q8_0, false},
          {DType::Q4_0, false}, {DType::Q8_0, true},  {DType::Q4_0, true},  {DType::Q2_K, false},
          {DType::Q3_K, false}, {DType::Q4_K, false}, {DType::Q5_K, false}, {DType::Q6_K, false},
          {DType::Q4_K, true}};
}

const DType kRowTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
// Row lengths: short ones, whole super-blocks for the K-quants.
int64_t row_length(DType t, int64_t short_length) {
  return is_kquant(t) ? 512 : short_length;
}

// One backend per instance (backend_names()): one this build or machine lacks (cuda without a
// GPU) is reported as skipped, test by test.
class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why_not;
    auto be = make_backend(GetParam(), pool, &why_not);
    if (be == nullptr) GTEST_SKIP() << GetParam() << ": " << why_not;
    backends.push_back({GetParam(), std::move(be)});
  }
  ThreadPool pool{2};
  std::vector<NamedBackend> backends;  // the one under test, as {name, backend}
};

TEST_P(BackendOps, MatmulEqualsTheReferenceForEveryTypeLayoutAndBatch) {
  for (auto& [name, be] : backends)
    for (const Case& c : product_cases())
      for (int64_t rows : {37, 64})
        for (int64_t n : {1, 5, 64}) {
          if (c.interleaved && rows % kInterleavedRows != 0) continue;
          const int64_t cols = row_length(c.type, 256);
          const Weights w = random_weights(c.type, rows, cols, 11, c.interleaved);
          // A layout only for the backends that ask for it (the CUDA kernels read rows).
          if (c.interleaved &&
              be->preferred_layout(w.view, WeightUse::Whole) != Layout::Interleaved16)
            continue;
          const std::vector<float> x = random_rows(n, cols, 12);
          const DeviceMatrix dw(*be, w.view);
          const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * rows), 0.0f);
          auto in = be->make_prepared(n);
          const DType readers[1] = {c.type};
          be->prepare(*in, dx.get(), cols, n, readers);
          std::vector<float> ref(static_cast<size_t>(n * rows));
          const RowsJob job{&dw.view, dy.get(), rows};
          be->matmul(std::span(&job, 1), *in);
          const std::vector<float> y = dy.read();
          reference::matmul(w.view, x.data(), n, ref.data(), rows);
          for (int64_t b = 0; b < n; ++b)
            for (int64_t r = 0; r < rows; ++r) {
              const double tol = product_tolerance(c.type, name, n, true) *
                                     magnitude(w.view, r, x.data() + b * cols) +
                                 1e-6;
              ASSERT_NEAR(y[static_cast<size_t>(b * rows + r)],
                          ref[static_cast<size_t>(b * rows + r)], tol)
                  << name << " " << dtype_name(c.type) << (c.interleaved ? " interleaved" : "")
                  << " rows " << rows << " batch " << n << " at " << b << "," << r;
            }
        }
}

// A batch of more than 8 tokens with one activation far above f16's range (65504): every
// backend's products stay finite and right (the CUDA GEMM once made its f16 inputs inf).
TEST_P(BackendOps, MatmulOfABatchWithAHugeActivationStaysRight) {
  const int64_t rows = 48, cols = 256, n = 16;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K}) {
      const int64_t length = row_length(t, cols);
      const Weights w = random_weights(t, rows, length, 13, false);
      std::vector<float> x = random_rows(n, length, 14);
      x[static_cast<size_t>(5 * length + 7)] = 1e5f;
      const DeviceMatrix dw(*be, w.view);
      const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * rows), 0.0f);
      auto in = be->make_prepared(n);
      const DType readers[1] = {t};
      be->prepare(*in, dx.get(), length, n, readers);
      const RowsJob job{&dw.view, dy.get(), rows};
      be->matmul(std::span(&job, 1), *in);
      const std::vector<float> y = dy.read();
      std::vector<float> ref(y.size());
      reference::matmul(w.view, x.data(), n, ref.data(), rows);
      // The CPU backends round activations to 8-bit blocks for quantized weights (as
      // llama.cpp does): a block holding 1e5 keeps little of its other values, so there only
      // finiteness is theirs to meet.
      const bool rounded = !name.starts_with("cuda") && t != DType::F32 && t != DType::F16;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t r = 0; r < rows; ++r) {
          if (rounded) {
            ASSERT_TRUE(std::isfinite(y[static_cast<size_t>(b * rows + r)])) << name;
            continue;
          }
          const double tol =
              product_tolerance(t, name, n, true) * magnitude(w.view, r, x.data() + b * length) +
              1e-6;
          ASSERT_NEAR(y[static_cast<size_t>(b * rows + r)], ref[static_cast<size_t>(b * rows + r)],
                      tol)
              << name << " " << dtype_name(t) << " token " << b;
        }
    }
}

TEST_P(BackendOps, GatherEqualsTheReferenceWithEmptyPartialAndFullLists) {
  const int64_t rows = 300;
  for (auto& [name, be] : backends)
    for (DType t : kRowTypes)
      for (int64_t n : {1, 64}) {
        const int64_t cols = row_length(t, 128);
        const Weights w = random_weights(t, rows, cols, 21, false);
        const std::vector<float> x = random_rows(n, cols, 22);
        std::vector<int32_t> partial;
        for (int32_t i = 0; i < rows; i += 3) partial.push_back(i);
        std::vector<int32_t> full(static_cast<size_t>(rows));
        for (int32_t i = 0; i < rows; ++i) full[static_cast<size_t>(i)] = i;
        for (const std::vector<int32_t>& ids : {std::vector<int32_t>{}, partial, full}) {
          const int64_t stride = rows;
          std::vector<uint8_t> need(static_cast<size_t>(n * stride));
          std::mt19937 rng(5);
          for (auto& v : need) v = rng() % 4 != 0;
          const DeviceMatrix dw(*be, w.view);
          const OnDevice<float> dx(*be, x), dy(*be, static_cast<size_t>(n * stride), -1.0f);
          const OnDevice<int32_t> dids(*be, ids);
          const OnDevice<uint8_t> dneed(*be, need);
          auto in = be->make_prepared(n);
          const DType readers[1] = {t};
          be->prepare(*in, dx.get(), cols, n, readers);
          std::vector<float> ref(static_cast<size_t>(n * stride), -1.0f);
          const RowsJob job{&dw.view, dy.get(), stride};
          be->gather(std::span(&job, 1), dids.span(), *in, dneed.get(), stride);
          const std::vector<float> y = dy.read();
          reference::gather(w.view, ids, x.data(), n, need.data(), stride, ref.data(), stride);
          for (int64_t b = 0; b < n; ++b)
            for (size_t k = 0; k < ids.size(); ++k) {
              const size_t at = static_cast<size_t>(b * stride) + k;
              if (need[at] == 0) {
                ASSERT_EQ(y[at], 0.0f) << name << " skipped product not zero";
                continue;
              }
              const double tol = product_tolerance(t, name, n, false) *
                                     magnitude(w.view, ids[k], x.data() + b * cols) +
                                 1e-6;
              ASSERT_NEAR(y[at], ref[at], tol) << name << " " << dtype_name(t) << " batch " << n;
            }
        }
      }
}

TEST_P(BackendOps, AxpyEqualsTheReferenceAndIgnoresTheRestOfTheList) {
  const int64_t neurons = 700;
  for (auto& [name, be] : backends)
    for (DType t : kRowTypes)
      for (int64_t n : {1, 64}) {
        const int64_t dim = row_length(t, 96);
        const Weights wt = random_weights(t, neurons, dim, 31, false);
        std::vector<int32_t> ids;
        for (int32_t i = 0; i < neurons; i += 2) ids.push_back(i);
        const int64_t stride = neurons;
        const std::vector<float> c = random_rows(n, stride, 32, /*zeros=*/0.5);
        const DeviceMatrix dwt(*be, wt.view);
        const OnDevice<int32_t> dids(*be, ids);
        const OnDevice<float> dc(*be, c), dout(*be, static_cast<size_t>(n * dim), 0.0f);
        be->axpy(dwt.view, dids.span(), dc.get(), stride, n, dout.get(), dim, {}, neurons);
        const std::vector<float> out = dout.read();
        std::vector<float> ref(out.size());
        reference::axpy(wt.view, ids, c.data(), stride, n, ref.data(), dim);
        std::vector<std::vector<float>> rows_f32;
        for (int32_t id : ids) rows_f32.push_back(reference::weight_row(wt.view, id));
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < dim; ++i) {
            double scale = 0;
            for (size_t k = 0; k < ids.size(); ++k)
              scale += std::abs(c[static_cast<size_t>(b * stride) + k] *
                                rows_f32[k][static_cast<size_t>(i)]);
            ASSERT_NEAR(out[static_cast<size_t>(b * dim + i)],
                        ref[static_cast<size_t>(b * dim + i)], 1e-5 * scale + 1e-6)
                << name << " " << dtype_name(t);
          }
        // A token's sum depends only on its own neurons: more zero-weighted entries in the
        // list change nothing, bit for bit.
        std::vector<int32_t> more;
        std::vector<float> c_more(static_cast<size_t>(n * 2 * stride), 0.0f);
        for (int32_t i = 0; i < neurons; ++i) more.push_back(i);
        for (int64_t b = 0; b < n; ++b)
          for (size_t k = 0; k < ids.size(); ++k)
            c_more[static_cast<size_t>(b * stride) + static_cast<size_t>(ids[k])] =
                c[static_cast<size_t>(b * stride) + k];
        const OnDevice<int32_t> dmore(*be, more);
        const OnDevice<float> dc_more(*be, c_more), dout_more(*be, out.size(), 0.0f);
        be->axpy(dwt.view, dmore.span(), dc_more.get(), stride, n, dout_more.get(), dim, {},
                 neurons);
        ASSERT_EQ(dout_more.read(), out) << name << " " << dtype_name(t);
      }
}

// No terms: every token's output is 0 (written), whatever the id bound, even 0 (the CUDA axpy
// once divided by it).
TEST_P(BackendOps, AxpyOfAnEmptyListWritesZeros) {
  const int64_t dim = 96, n = 3;
  for (auto& [name, be] : backends)
    for (int64_t id_bound : {0, 300}) {
      const Weights wt = random_weights(DType::F16, 4, dim, 35, false);
      const DeviceMatrix dwt(*be, wt.view);
      const OnDevice<float> dc(*be, static_cast<size_t>(n), 1.0f),
          dout(*be, static_cast<size_t>(n * dim), -1.0f);
      be->axpy(dwt.view, {}, dc.get(), 1, n, dout.get(), dim, {}, id_bound);
      EXPECT_EQ(dout.read(), std::vector<float>(static_cast<size_t>(n * dim), 0.0f))
          << name << " id bound " << id_bound;
    }
}

// A list of two ascending runs (a neuron cache's passes) equals the reference; on the CUDA
// backends, whose partials go in bucket order, the same bits as the ascending list when each
// bucket of ids lies in one run (the CPU adds its runs' partials in list order: within rounding).
TEST_P(BackendOps, AxpyOfTwoAscendingRunsEqualsTheAscendingList) {
  const int64_t neurons = 1024, dim = 64, n = 2;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F32, DType::Q4_0}) {
      const Weights wt = random_weights(t, neurons, dim, 36, false);
      std::vector<int32_t> first, second;  // buckets 0 and 2, then 1 and 3
      for (int32_t i = 0; i < neurons; i += 5) (i / 256 % 2 == 0 ? first : second).push_back(i);
      std::vector<int32_t> runs = first, sorted;
      runs.insert(runs.end(), second.begin(), second.end());
      for (int32_t i = 0; i < neurons; i += 5) sorted.push_back(i);
      const int64_t stride = static_cast<int64_t>(runs.size());
      const std::vector<float> c_runs = random_rows(n, stride, 37, 0.3);
      std::vector<float> c_sorted(c_runs.size());
      for (int64_t b = 0; b < n; ++b)
        for (size_t k = 0; k < runs.size(); ++k) {
          const size_t at = static_cast<size_t>(
              std::lower_bound(sorted.begin(), sorted.end(), runs[k]) - sorted.begin());
          c_sorted[static_cast<size_t>(b * stride) + at] =
              c_runs[static_cast<size_t>(b * stride) + k];
        }
      const DeviceMatrix dwt(*be, wt.view);
      const OnDevice<int32_t> druns(*be, runs), dsorted(*be, sorted);
      const OnDevice<float> dcr(*be, c_runs), dcs(*be, c_sorted),
          dout_runs(*be, static_cast<size_t>(n * dim), 0.0f),
          dout_sorted(*be, static_cast<size_t>(n * dim), 0.0f);
      be->axpy(dwt.view, druns.span(), dcr.get(), stride, n, dout_runs.get(), dim, {}, neurons);
      be->axpy(dwt.view, dsorted.span(), dcs.get(), stride, n, dout_sorted.get(), dim, {}, neurons);
      const std::vector<float> got = dout_runs.read(), want = dout_sorted.read();
      std::vector<float> ref(got.size());
      reference::axpy(wt.view, runs, c_runs.data(), stride, n, ref.data(), dim);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-4 * (std::abs(ref[i]) + 1)) << name << " " << dtype_name(t);
      if (name.starts_with("cuda")) {
        EXPECT_EQ(got, want) << name << " " << dtype_name(t);
      }
    }
}

// Rows that are slots of a compacted store (a VRAM store, a neuron cache) with their neuron ids
// beside them: the ids fix the order of additions, so the sum is the one over the full matrix's
// rows, bit for bit.
TEST_P(BackendOps, AxpyOverSlotsWithTheirNeuronIdsEqualsTheFullMatrix) {
  const int64_t neurons = 600, dim = 128, n = 3;
  for (auto& [name, be] : backends)
    for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0}) {
      const Weights full = random_weights(t, neurons, dim, 71, false);
      std::vector<int32_t> ids, slots;
      for (int32_t i = 1; i < neurons; i += 3) ids.push_back(i);
      // The compacted rows: slot k holds neuron ids[k].
      Weights compact = full;
      compact.bytes.assign(
          full.bytes.begin(),
          full.bytes.begin() + static_cast<long>(ids.size() * full.view.row_bytes));
      for (size_t k = 0; k < ids.size(); ++k) {
        std::copy_n(full.view.row(ids[k]), full.view.row_bytes,
                    compact.bytes.data() + k * full.view.row_bytes);
        slots.push_back(static_cast<int32_t>(k));
      }
      compact.view.data = compact.bytes.data();
      compact.view.rows = static_cast<int64_t>(ids.size());
      const std::vector<float> c = random_rows(n, static_cast<int64_t>(ids.size()), 72, 0.3);
      const DeviceMatrix dfull(*be, full.view), dcompact(*be, compact.view);
      const OnDevice<int32_t> dids(*be, ids), dslots(*be, slots);
      const OnDevice<float> dc(*be, c), da(*be, static_cast<size_t>(n * dim), 0.0f),
          db(*be, static_cast<size_t>(n * dim), 0.0f);
      const int64_t stride = static_cast<int64_t>(ids.size());
      be->axpy(dfull.view, dids.span(), dc.get(), stride, n, da.get(), dim, {}, neurons);
      be->axpy(dcompact.view, dslots.span(), dc.get(), stride, n, db.get(), dim, dids.span(),
               neurons);
      ASSERT_EQ(db.read(), da.read()) << name << " " << dtype_name(t);
    }
}

// A batch whose partial sums exceed the axpy's scratch bound (kAxpyScratchBytes) goes in
// chunks of tokens: each token's result is what it gives alone, bit for bit.
TEST_P(BackendOps, AxpyOfALargeBatchInChunksEqualsTokensAlone) {
  const int64_t neurons = 4096, dim = 4096, n = 64;
  const Weights wt = random_weights(DType::F16, neurons, dim, 61, false);
  std::vector<int32_t> ids(static_cast<size_t>(neurons));
  for (int32_t i = 0; i < neurons; ++i) ids[static_cast<size_t>(i)] = i;
  const std::vector<float> c = random_rows(n, neurons, 62, /*zeros=*/0.5);
  for (auto& [name, be] : backends) {
    const DeviceMatrix dwt(*be, wt.view);
    const OnDevice<int32_t> dids(*be, ids);
    const OnDevice<float> dc(*be, c), dbatch(*be, static_cast<size_t>(n * dim), 0.0f),
        dalone(*be, static_cast<size_t>(dim), 0.0f);
    be->axpy(dwt.view, dids.span(), dc.get(), neurons, n, dbatch.get(), dim, {}, neurons);
    const std::vector<float> batch = dbatch.read();
    for (int64_t b = 0; b < n; ++b) {
      be->axpy(dwt.view, dids.span(), dc.get() + b * neurons, neurons, 1, dalone.get(), dim, {},
               neurons);
      const std::vector<float> alone = dalone.read();
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + b * dim))
          << name << " token " << b;
    }
  }
}

// A batch's places in a cache of sequences (TokenPlaces): one sequence at `first`, or (mixed)
// tokens alternating between two sequences whose ranges start at rows 0 and n_ctx, each at its
// own `first` (3 and 9), in position order.
struct BatchPlaces {
  std::vector<int64_t> pos, base;
  TokenPlaces view() const { return {pos.data(), base.data()}; }
};

BatchPlaces batch_places(int64_t n, int64_t first, bool mixed, int64_t n_ctx) {
  BatchPlaces p;
  for (int64_t b = 0; b < n; ++b) {
    const bool second = mixed && b % 2 == 1;
    p.pos.push_back(mixed ? (second ? 9 : 3) + b / 2 : first + b);
    p.base.push_back(second ? n_ctx : 0);
  }
  return p;
}

TEST_P(BackendOps, NormRopeKvAndAttentionEqualTheReference) {
  const HeadShape s{8, 2, 16};
  const int64_t n_ctx = 70, half = 8, prior_rows = 2 * n_ctx;
  struct Case {
    int64_t n, first;
    bool mixed;
  };
  for (auto& [name, be] : backends)
    for (DType kv_type : {DType::F32, DType::F16})
      // Cache rows as wide as the heads, and wider (a cache laid out for more than the batch's
      // rows hold: the rows of k and v are the heads' width, the cache's its own).
      for (const int64_t row : {s.kv_dim(), s.kv_dim() + 8})
        for (const Case& cs_ :
             {Case{1, 5, false}, Case{64, 3, false}, Case{64, 0, true}, Case{2, 0, true}}) {
          const int64_t n = cs_.n;
          const BatchPlaces places = batch_places(n, cs_.first, cs_.mixed, n_ctx);
          const std::string what = name + (cs_.mixed ? " two sequences" : " one sequence") +
                                   " cache rows of " + std::to_string(row);
          std::vector<float> x = random_rows(n, 64, 41), w = random_rows(1, 64, 42);
          std::vector<float> ref(x.size());
          {
            const OnDevice<float> dx(*be, x), dw(*be, w), dout(*be, x.size(), 0.0f);
            be->rms_norm(dx.get(), dw.get(), dout.get(), n, 64, 1e-5f);
            reference::rms_norm(x.data(), w.data(), ref.data(), n, 64, 1e-5f);
            const std::vector<float> out = dout.read();
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_NEAR(out[i], ref[i], 1e-5 * std::abs(ref[i]) + 1e-6) << name;
          }
          // RoPE and the KV append, then attention over each token's sequence up to its position.
          std::vector<float> cs(static_cast<size_t>(n * half)), sn(cs.size());
          for (int64_t b = 0; b < n; ++b)
            for (int64_t i = 0; i < half; ++i) {
              const double theta =
                  places.pos[static_cast<size_t>(b)] * std::pow(10000.0, -2.0 * i / 16.0);
              cs[static_cast<size_t>(b * half + i)] = static_cast<float>(std::cos(theta));
              sn[static_cast<size_t>(b * half + i)] = static_cast<float>(std::sin(theta));
            }
          const size_t elem = kv_type == DType::F16 ? 2 : 4;
          std::vector<uint8_t> kc(static_cast<size_t>(prior_rows * row) * elem), vc(kc.size());
          // Every row before the batch holds something (stored unrotated by the reference), so
          // a token that read another sequence's rows, or rows past its own, would differ.
          {
            const KvLayer host_kv{kc.data(), vc.data(), kv_type, kv_type, row};
            const std::vector<float> prior = random_rows(prior_rows, 2 * s.kv_dim(), 43);
            std::vector<float> pk(prior.begin(), prior.begin() + prior_rows * s.kv_dim());
            std::vector<float> pv(prior.begin() + prior_rows * s.kv_dim(), prior.end());
            std::vector<float> q0(static_cast<size_t>(prior_rows * s.q_dim()));
            std::vector<float> one(static_cast<size_t>(prior_rows * half), 1.0f),
                zero(one.size(), 0.0f);
            BatchPlaces all;
            for (int64_t r = 0; r < prior_rows; ++r) all.pos.push_back(r), all.base.push_back(0);
            reference::rope_and_store(q0.data(), pk.data(), pv.data(), prior_rows, s,
                                      {one.data(), zero.data(), half}, host_kv, all.view());
          }
          std::vector<uint8_t> kc_ref = kc, vc_ref = vc;
          const KvLayer kv_ref{kc_ref.data(), vc_ref.data(), kv_type, kv_type, row};
          const OnDevice<uint8_t> dkc(*be, kc), dvc(*be, vc);
          const KvLayer kv{dkc.get(), dvc.get(), kv_type, kv_type, row};
          std::vector<float> q = random_rows(n, s.q_dim(), 44), k = random_rows(n, s.kv_dim(), 45),
                             v = random_rows(n, s.kv_dim(), 46);
          std::vector<float> q_ref = q, k_ref = k;
          const OnDevice<float> dq(*be, q), dk(*be, k), dv(*be, v), dcs(*be, cs), dsn(*be, sn);
          be->rope_and_store(dq.get(), dk.get(), dv.get(), n, s, {dcs.get(), dsn.get(), half}, kv,
                             places.view());
          reference::rope_and_store(q_ref.data(), k_ref.data(), v.data(), n, s,
                                    {cs.data(), sn.data(), half}, kv_ref, places.view());
          q = dq.read();
          kc = dkc.read();
          vc = dvc.read();
          for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(q[i], q_ref[i], 1e-5) << what;
          // Keys are rotated (rounding may differ in the last bit, then F16's); values are copied.
          for (int64_t i = 0; i < prior_rows * row; ++i) {
            const float a = kv_type == DType::F16
                                ? f16_to_f32(reinterpret_cast<const uint16_t*>(kc.data())[i])
                                : reinterpret_cast<const float*>(kc.data())[i];
            const float r = kv_type == DType::F16
                                ? f16_to_f32(reinterpret_cast<const uint16_t*>(kc_ref.data())[i])
                                : reinterpret_cast<const float*>(kc_ref.data())[i];
            ASSERT_NEAR(a, r, 1e-3 * std::abs(r) + 1e-6) << what << " key " << i;
          }
          ASSERT_EQ(vc, vc_ref) << what << " values stored differently";
          const OnDevice<float> dscores(*be, static_cast<size_t>(n * s.n_head * n_ctx), 0.0f),
              datt(*be, static_cast<size_t>(n * s.q_dim()), 0.0f);
          be->attention(dq.get(), n, s, kv, places.view(), n_ctx, dscores.get(), datt.get());
          const std::vector<float> att = datt.read();
          std::vector<float> att_ref(att.size());
          reference::attention(q.data(), n, s, kv_ref, places.view(), att_ref.data());
          for (size_t i = 0; i < att.size(); ++i)
            ASSERT_NEAR(att[i], att_ref[i], 1e-4) << what << " attention";
        }
}

TEST_P(BackendOps, ActivationsSelectionAndElementwiseOpsEqualTheReference) {
  const int64_t n = 3, ff = 50;
  const std::vector<float> gate = random_rows(n, ff, 51), up = random_rows(n, ff, 52);
  for (auto& [name, be] : backends) {
    const OnDevice<float> dgate(*be, gate), dup(*be, up);
    for (FfnActivation act :
         {FfnActivation::SwiGLU, FfnActivation::ReGLU, FfnActivation::DReLU, FfnActivation::ReLU}) {
      const OnDevice<float> dh(*be, gate.size(), 0.0f);
      std::vector<float> ref(gate.size());
      be->activation(act, dgate.get(), dup.get(), dh.get(), n * ff);
      reference::activation(act, gate.data(), up.data(), ref.data(), n * ff);
      const std::vector<float> h = dh.read();
      for (size_t i = 0; i < h.size(); ++i)
        ASSERT_NEAR(h[i], ref[i], 1e-6 * std::abs(ref[i]) + 1e-7) << name;
    }
    const OnDevice<uint8_t> dmask(*be, static_cast<size_t>(n * ff), uint8_t{7}),
        dneed(*be, static_cast<size_t>(n * ff), uint8_t{7});
    const OnDevice<int32_t> dids(*be, static_cast<size_t>(ff), -1);
    be->threshold(dgate.get(), 0.0f, true, dmask.get(), n * ff);
    const std::vector<uint8_t> mask = dmask.read();
    for (size_t i = 0; i < mask.size(); ++i) ASSERT_EQ(mask[i], gate[i] > 0.0f);
    uint64_t selected = 0;
    const int64_t count = be->select_union(dmask.get(), n, ff, dids.get(), dneed.get(), &selected);
    const std::vector<int32_t> ids = dids.read();
    const std::vector<uint8_t> need = dneed.read();
    uint64_t expected = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < ff; ++i) {
      bool any = false;
      for (int64_t b = 0; b < n; ++b) any = any || mask[static_cast<size_t>(b * ff + i)];
      if (!any) continue;
      ASSERT_EQ(ids[static_cast<size_t>(k)], i);
      for (int64_t b = 0; b < n; ++b) {
        ASSERT_EQ(need[static_cast<size_t>(b * ff + k)], mask[static_cast<size_t>(b * ff + i)]);
        expected += mask[static_cast<size_t>(b * ff + i)];
      }
      ++k;
    }
    ASSERT_EQ(count, k);
    ASSERT_EQ(selected, expected);
    const OnDevice<float> dcols(*be, static_cast<size_t>(n * ff), 0.0f);
    be->select_columns(dup.get(), dids.span().first(static_cast<size_t>(count)), n, ff,
                       dcols.get());
    const std::vector<float> cols = dcols.read();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < count; ++j)
        ASSERT_EQ(cols[static_cast<size_t>(b * ff + j)],
                  up[static_cast<size_t>(b * ff + ids[static_cast<size_t>(j)])]);
    const OnDevice<uint64_t> dnonzero(*be, 1, uint64_t{5});
    be->keep_needed(dcols.get(), dneed.get(), n, ff, 0, count, dnonzero.get());
    const uint64_t nonzero = dnonzero.read()[0] - 5;  // added to what the counter held
    const std::vector<float> h = dcols.read();
    uint64_t expect_nonzero = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < count; ++j) {
        const size_t at = static_cast<size_t>(b * ff + j);
        ASSERT_EQ(h[at], need[at] ? cols[at] : 0.0f);
        expect_nonzero += h[at] != 0.0f;
      }
    ASSERT_EQ(nonzero, expect_nonzero);
    const OnDevice<float> dsum(*be, gate);
    be->add(dsum.get(), dup.get(), n * ff);
    const std::vector<float> sum = dsum.read();
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], gate[i] + up[i]);
    // copy (KV rows of one sequence to another) and dequantize_row (embedding lookup).
    const OnDevice<float> dcopy(*be, gate.size(), 0.0f);
    be->copy(dcopy.get(), dgate.get(), gate.size() * sizeof(float));
    ASSERT_EQ(dcopy.read(), gate) << name;
    for (DType t : kRowTypes) {
      const int64_t len = row_length(t, 64);
      const Weights row = random_weights(t, 1, len, 53, false);
      std::vector<float> expect(static_cast<size_t>(len));
      dequantize_row(t, row.view.data, expect.data(), len);
      const OnDevice<float> dout(*be, expect.size(), 0.0f);
      be->dequantize_row(t, row.view.data, dout.get(), len);
      ASSERT_EQ(dout.read(), expect) << name << " " << dtype_name(t);
    }
  }
}

TEST_P(BackendOps, MemoryIsCountedAndTheTimelineMovesForward) {
  for (auto& [name, be] : backends) {
    const uint64_t before = be->allocated();
    const Buffer b = be->allocate(3 << 20);
    EXPECT_EQ(b.device, be->device());
    EXPECT_GE(be->allocated() - before, 3u << 20) << name;
    std::vector<uint8_t> back(b.bytes, 1);
    be->download(back.data(), b.data, b.bytes);
    for (uint64_t i = 0; i < b.bytes; i += 4096) ASSERT_EQ(back[i], 0) << "not zeroed";
    be->release(b);
    EXPECT_EQ(be->allocated(), before) << name;
    const Event e0 = be->record();
    const Event e1 = be->record();
    EXPECT_GE(be->elapsed(e0, e1), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Every, BackendOps, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// The reference device holds code above it to a GPU's rules: host memory passed to an op, and
// allocations past its budget, are one-line errors naming what went wrong.
TEST(ReferenceDevice, RefusesHostMemoryAndAllocationsPastItsBudget) {
  ReferenceDeviceOptions o;
  o.budget = 1 << 20;
  ReferenceDevice dev(o);
  std::vector<float> host(64, 1.0f);
  const OnDevice<float> y(dev, host);
  try {
    dev.add(y.get(), host.data(), 64);
    FAIL() << "host memory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  try {
    dev.allocate(2 << 20, "layer 3 attn_q");
    FAIL() << "an allocation past the budget was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3 attn_q needs 2.0 MiB"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dev.allocated(), 256u);
}

// Ops are queued: the result is there after download (which waits), and a failing op's error
// comes out of synchronize().
TEST(ReferenceDevice, RunsOpsInOrderOnItsOwnThread) {
  ReferenceDevice dev;
  const std::vector<float> ones(4096, 1.0f);
  const OnDevice<float> x(dev, ones), y(dev, ones);
  for (int i = 0; i < 100; ++i) dev.add(x.get(), y.get(), 4096);
  EXPECT_EQ(x.read(), std::vector<float>(4096, 101.0f));
  const Event a = dev.record();
  dev.add(x.get(), y.get(), 4096);
  const Event b = dev.record();
  dev.synchronize();
  EXPECT_GE(dev.elapsed(a, b), 0.0);
}

}  // namespace
}  // namespace strata
