// The neuron-aware operators against the dense computation with the mask applied, scalar vs
// SIMD, and across thread counts (must be bit-identical).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/sparse_ops.h"
#include "core/thread_pool.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // what the stored (possibly quantized) weights represent
  MatrixView view;
};

TestMatrix make_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (auto& x : v) x = dist(rng);
  TestMatrix m;
  const uint64_t rb = row_bytes(type, cols);
  m.bytes.resize(rb * rows);
  m.values.resize(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, v.data() + r * cols, m.bytes.data() + r * rb, cols);
    dequantize_row(type, m.bytes.data() + r * rb, m.values.data() + r * cols, cols);
  }
  m.view = {type, m.bytes.data(), cols, rows, rb};
  return m;
}

// A random sorted neuron list (density about p) and per-token coefficients, some exactly zero.
struct Selection {
  std::vector<int32_t> ids;
  std::vector<float> coef;  // [batch][ids]
};

Selection random_selection(int64_t n_ff, int64_t batch, double p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution pick(p), zero(0.2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Selection s;
  for (int32_t i = 0; i < n_ff; ++i)
    if (pick(rng)) s.ids.push_back(i);
  s.coef.resize(batch * s.ids.size());
  for (auto& c : s.coef) c = zero(rng) ? 0.0f : dist(rng);
  return s;
}

const DType kOpTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

std::vector<const CpuKernels*> variants() {
  return supported_kernels();
}

TEST(SparseOps, AxpyEqualsDenseDownProjectionWithMaskApplied) {
  // wt is ffn_down_t: n_ff rows of n_embd. The dense reference is the down projection
  // out[j] = sum_i down[j][i] * h[i] with h zero outside the selection, in double precision
  // on the values the stored weights represent. No activation quantization is involved, so
  // the only error is float rounding of the sum: tolerance 1e-5 relative to sum |terms|.
  const int64_t n_embd = 320, n_ff = 700, batch = 3;
  ThreadPool pool(2);
  for (DType type : kOpTypes) {
    const TestMatrix wt = make_matrix(type, n_ff, n_embd, 11);
    for (double p : {0.02, 0.1, 0.5, 1.0}) {
      const Selection s = random_selection(n_ff, batch, p, 5);
      for (const CpuKernels* k : variants()) {
        std::vector<float> out(batch * n_embd, -1.0f);
        axpy_rows(*k, wt.view, s.ids, s.coef.data(), s.ids.size(), batch, out.data(), n_embd, pool);
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t j = 0; j < n_embd; ++j) {
            double ref = 0, mag = 0;
            for (size_t q = 0; q < s.ids.size(); ++q) {
              const double term =
                  double{s.coef[b * s.ids.size() + q]} * wt.values[s.ids[q] * n_embd + j];
              ref += term;
              mag += std::fabs(term);
            }
            ASSERT_NEAR(out[b * n_embd + j], ref, 1e-5 * mag + 1e-30)
                << dtype_name(type) << " " << k->name << " p=" << p << " b=" << b << " j=" << j;
          }
      }
    }
  }
}

TEST(SparseOps, AxpySkipsZeroCoefficientsSoNonFiniteRowsDoNotLeak) {
  // A neuron whose activation is exactly 0 must not be read into the sum (0 * inf = NaN).
  const int64_t n_embd = 64;
  std::vector<float> w(2 * n_embd, 1.0f);
  for (int64_t j = 0; j < n_embd; ++j) w[n_embd + j] = INFINITY;
  const MatrixView v{DType::F32, reinterpret_cast<const uint8_t*>(w.data()), n_embd, 2,
                     n_embd * sizeof(float)};
  const std::vector<int32_t> ids{0, 1};
  const std::vector<float> coef{2.0f, 0.0f};
  ThreadPool pool(1);
  std::vector<float> out(n_embd);
  axpy_rows(best_kernels(), v, ids, coef.data(), 2, 1, out.data(), n_embd, pool);
  for (float o : out) ASSERT_EQ(o, 2.0f);
}

TEST(SparseOps, GatherEqualsDenseRowsOfTheMatrixProduct) {
  // gate/up rows computed over a neuron list equal the same rows of the dense product, token by
  // token, exactly: both are the same dot_row call. Skipped (need = 0) entries are written as 0.
  const int64_t n_embd = 256, n_ff = 500, batch = 2;
  ThreadPool pool(3);
  for (DType type : kOpTypes) {
    const TestMatrix w = make_matrix(type, n_ff, n_embd, 21);
    std::vector<float> xs(batch * n_embd);
    std::mt19937 rng(4);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto& x : xs) x = dist(rng);
    for (const CpuKernels* k : variants()) {
      std::vector<PreparedInput> in(batch);
      for (int64_t b = 0; b < batch; ++b)
        in[b].prepare(*k, xs.data() + b * n_embd, n_embd, needs_q8_input(type));
      std::vector<float> dense(batch * n_ff);
      for (int64_t b = 0; b < batch; ++b)
        matvec_multi(*k, {{&w.view, dense.data() + b * n_ff}}, in[b], pool);
      const Selection s = random_selection(n_ff, batch, 0.1, 9);
      std::vector<uint8_t> need(batch * s.ids.size());
      for (size_t i = 0; i < need.size(); ++i) need[i] = s.coef[i] != 0.0f;
      std::vector<float> y(batch * s.ids.size(), -1.0f);
      const GatherJob job{&w.view, y.data(), static_cast<int64_t>(s.ids.size())};
      gather_matmat(*k, std::span(&job, 1), s.ids, in, pool, need.data(), s.ids.size());
      for (int64_t b = 0; b < batch; ++b)
        for (size_t q = 0; q < s.ids.size(); ++q)
          ASSERT_EQ(y[b * s.ids.size() + q],
                    need[b * s.ids.size() + q] != 0 ? dense[b * n_ff + s.ids[q]] : 0.0f)
              << dtype_name(type) << " " << k->name;
    }
  }
}

TEST(SparseOps, ResultsIdenticalForOneTwoAndThreeThreads) {
  const int64_t n_ff = 600, batch = 2;
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    // Not a multiple of the split (K-quant slices are whole 256-element blocks).
    const int64_t n_embd = type == DType::Q4_K ? 4096 + 256 : 4096 + 64;
    const TestMatrix wt = make_matrix(type, n_ff, n_embd, 31);
    const Selection s = random_selection(n_ff, batch, 0.15, 8);
    std::vector<std::vector<float>> results;
    // 9 threads: more than the items of a token's list (each thread's share is a few buckets).
    for (int threads : {1, 2, 3, 9}) {
      ThreadPool pool(threads);
      std::vector<float> out(batch * n_embd);
      axpy_rows(best_kernels(), wt.view, s.ids, s.coef.data(), s.ids.size(), batch, out.data(),
                n_embd, pool);
      results.push_back(out);
    }
    EXPECT_EQ(results[0], results[1]) << dtype_name(type);
    EXPECT_EQ(results[0], results[2]) << dtype_name(type);
    EXPECT_EQ(results[0], results[3]) << dtype_name(type);
  }
}

TEST(SparseOps, SimdAxpyMatchesScalarOverRowGroups) {
  const auto all = variants();
  if (all.size() == 1) GTEST_SKIP() << "CPU without SIMD variants";
  for (DType type : kOpTypes) {
    const TestMatrix wt = make_matrix(
        type, 9, 1000 - 1000 % 32 + 32 + (type == DType::Q8_0 || type == DType::Q4_0 ? 0 : 13 - 32),
        41);
    // 3, 5 and 8 rows: one partial sub-group of the float kernels' read-ahead, a full one and a
    // partial one, a whole kAxpyGroup (two sub-groups).
    const int64_t rows[] = {2, 0, 3, 8, 5, 1, 7, 4};
    const float c[] = {-1.25f, 0.5f, 2.0f, 0.75f, -0.5f, 1.5f, -2.0f, 0.25f};
    for (int n_rows : {3, 5, 8})
      for (const CpuKernels* k : all) {
        std::vector<float> a(wt.view.cols, 0.5f), b(wt.view.cols, 0.5f);
        axpy_row_slice(scalar_kernels(), wt.view, rows, c, n_rows, a.data(), 0, wt.view.cols);
        // With rows of a next call to prefetch: the same values.
        const int64_t next[] = {1, 3, 6};
        axpy_row_slice(*k, wt.view, rows, c, n_rows, b.data(), 0, wt.view.cols, next, 3);
        for (int64_t j = 0; j < wt.view.cols; ++j)
          ASSERT_NEAR(a[j], b[j], 1e-6f * (1 + std::fabs(a[j])))
              << dtype_name(type) << kernels_label(*k) << " rows " << n_rows;
      }
  }
}

TEST(SparseOps, NearAndFarReadAheadsGiveTheSameBits) {
  // The read-ahead changes which lines are requested and how many rows share a pass over y,
  // never the order of an element's additions: the two tables of an instruction set agree bit
  // for bit, for every row count around the sub-groups' sizes and a row length with a tail.
  int compared = 0;
  for (auto* kernels : {avx2_kernels, avx512vnni_kernels}) {
    const CpuKernels* far = kernels(ColumnReadAhead::Far);
    const CpuKernels* near = kernels(ColumnReadAhead::Near);
    if (far == nullptr) continue;
    ASSERT_NE(near, nullptr);
    EXPECT_EQ(far->read_ahead, ColumnReadAhead::Far);
    EXPECT_EQ(near->read_ahead, ColumnReadAhead::Near);
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
      const TestMatrix wt = make_matrix(type, 9, 4096 + 13, 43);
      const int64_t rows[] = {2, 0, 3, 8, 5, 1, 7, 4};
      const float c[] = {-1.25f, 0.5f, 2.0f, 0.75f, -0.5f, 1.5f, -2.0f, 0.25f};
      const int64_t next[] = {1, 3, 6};
      for (int n_rows = 1; n_rows <= 8; ++n_rows) {
        std::vector<float> a(wt.view.cols, 0.5f), b(wt.view.cols, 0.5f);
        axpy_row_slice(*far, wt.view, rows, c, n_rows, a.data(), 0, wt.view.cols, next, 3);
        axpy_row_slice(*near, wt.view, rows, c, n_rows, b.data(), 0, wt.view.cols, next, 3);
        ASSERT_EQ(a, b) << dtype_name(type) << " " << far->name << " rows " << n_rows;
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "CPU without SIMD variants";
}

}  // namespace
}  // namespace strata
