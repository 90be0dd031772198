#include "offline/float_products.h"

#include <algorithm>

#include "backends/cpu/token_lanes.h"

namespace strata {

namespace {

MatrixView f32_rows(const float* w, int64_t rows, int64_t cols) {
  MatrixView v;
  v.type = DType::F32;
  v.data = reinterpret_cast<const uint8_t*>(w);
  v.rows = rows;
  v.cols = cols;
  v.row_bytes = static_cast<uint64_t>(cols) * sizeof(float);
  return v;
}

// y[t * rows + r] = w[r] . x[t]: the rows split over the pool in blocks of 16.
void rows_times_tokens(const CpuKernels& kernels, ThreadPool& pool, const float* w, int64_t rows,
                       const float* x, int64_t tokens, int64_t k, float* y) {
  if (!uses_token_lanes(tokens, kernels.token_lanes)) {
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = r0; r < r1; ++r) y[t * rows + r] = kernels.dot_f32(w + r * k, x + t * k, k);
    });
    return;
  }
  std::vector<const float*> xs(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) xs[static_cast<size_t>(t)] = x + t * k;
  TokenLaneActivations lanes;
  lanes.prepare(xs, k, kernels.token_lanes);
  const MatrixView view = f32_rows(w, rows, k);
  constexpr int64_t kBlock = 16;
  pool.parallel_for((rows + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1, int) {
    token_lane_rows(kernels, view, b0 * kBlock, std::min(rows, b1 * kBlock), lanes, y, rows);
  });
}

}  // namespace

void multiply_ab_transposed(const CpuKernels& kernels, ThreadPool& pool, const float* a,
                            int64_t m, const float* b, int64_t n, int64_t k,
                            std::vector<float>& c) {
  c.resize(static_cast<size_t>(m * n));
  if (!uses_token_lanes(n, kernels.token_lanes)) {
    std::vector<float> bt;
    transpose(pool, b, k, n, bt);
    return rows_times_tokens(kernels, pool, a, m, bt.data(), n, k, c.data());
  }
  TokenLaneActivations lanes;
  lanes.prepare_columns(b, k, n, kernels.token_lanes);
  const MatrixView view = f32_rows(a, m, k);
  constexpr int64_t kBlock = 16;
  pool.parallel_for((m + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1, int) {
    token_lane_rows(kernels, view, b0 * kBlock, std::min(m, b1 * kBlock), lanes, c.data(), m);
  });
}

void transpose(ThreadPool& pool, const float* src, int64_t rows, int64_t cols,
               std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  constexpr int64_t kTile = 32;  // both sides of a tile stay in L1
  float* out = dst.data();
  pool.parallel_for((rows + kTile - 1) / kTile, [&](int64_t b0, int64_t b1, int) {
    for (int64_t r0 = b0 * kTile; r0 < std::min(rows, b1 * kTile); r0 += kTile)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = src[r * cols + c];
      }
  });
}

void multiply_abt(const CpuKernels& kernels, ThreadPool& pool, const float* a, int64_t m,
                  const float* b, int64_t n, int64_t k, std::vector<float>& c) {
  c.resize(static_cast<size_t>(m * n));
  // The side with more rows is the weight side (the pool splits it); the other must fill a
  // group of token lanes.
  const bool b_is_weight = n >= m || !uses_token_lanes(n, kernels.token_lanes);
  if (b_is_weight) return rows_times_tokens(kernels, pool, b, n, a, m, k, c.data());
  std::vector<float> ct(static_cast<size_t>(m * n));
  rows_times_tokens(kernels, pool, a, m, b, n, k, ct.data());  // ct[j * m + i] = c[i][j]
  transpose(pool, ct.data(), n, m, c);
}

}  // namespace strata
