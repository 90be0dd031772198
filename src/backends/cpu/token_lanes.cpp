#include "backends/cpu/token_lanes.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

void TokenLaneActivations::prepare(std::span<const float* const> xs, int64_t cols, int lanes) {
  tokens_ = static_cast<int64_t>(xs.size());
  cols_ = cols;
  lanes_ = lanes;
  groups_ = static_cast<int>((tokens_ + lanes - 1) / lanes);
  const int64_t width = static_cast<int64_t>(groups_) * lanes;
  xt_.assign(static_cast<size_t>((width * cols + 15) / 16), Line{});
  float* xt = xt_.data()->v;
  // Column by column in blocks of 16 tokens x 64 columns, so reads and writes stay in L1.
  constexpr int64_t kBlockCols = 64, kBlockTokens = 16;
  for (int64_t t0 = 0; t0 < tokens_; t0 += kBlockTokens)
    for (int64_t k0 = 0; k0 < cols; k0 += kBlockCols) {
      const int64_t t1 = std::min(tokens_, t0 + kBlockTokens), k1 = std::min(cols, k0 + kBlockCols);
      for (int64_t t = t0; t < t1; ++t) {
        const float* x = xs[static_cast<size_t>(t)];
        for (int64_t k = k0; k < k1; ++k) xt[k * width + t] = x[k];
      }
    }
}

void TokenLaneActivations::prepare_columns(const float* m, int64_t rows, int64_t tokens,
                                           int lanes) {
  tokens_ = tokens;
  cols_ = rows;
  lanes_ = lanes;
  groups_ = static_cast<int>((tokens_ + lanes - 1) / lanes);
  const int64_t width = static_cast<int64_t>(groups_) * lanes;
  xt_.assign(static_cast<size_t>((width * rows + 15) / 16), Line{});
  float* xt = xt_.data()->v;
  for (int64_t k = 0; k < rows; ++k) std::copy_n(m + k * tokens, tokens, xt + k * width);
}

bool uses_token_lanes(int64_t batch, int lanes) {
  return lanes > 0 && batch >= lanes;
}

void token_lane_rows(const CpuKernels& k, const MatrixView& w, int64_t lo, int64_t hi,
                     const TokenLaneActivations& x, float* y, int64_t y_stride) {
  constexpr int kRows = 16;
  if (!is_float_type(w.type)) fail("token lanes take float weights, not {}", dtype_name(w.type));
  if (x.cols() != w.cols || x.lanes() != k.token_lanes)
    fail("token lanes: activations of {} columns in lanes of {} for {} columns in lanes of {}",
         x.cols(), x.lanes(), w.cols, k.token_lanes);
  const int64_t width = static_cast<int64_t>(x.groups()) * k.token_lanes;
  struct alignas(64) Line {
    float v[16];
  };
  thread_local std::vector<Line> workers_out;  // the worker's, kept between calls
  workers_out.resize(static_cast<size_t>(kRows * width + 15) / 16);
  float* out = workers_out.data()->v;
  const int64_t elems = w.type == DType::F32 ? 4 : 2;
  const int64_t row_stride = static_cast<int64_t>(w.row_bytes) / elems;
  for (int64_t r0 = lo; r0 < hi; r0 += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, hi - r0));
    // Each token's results go to its own line of y (a batch's y is larger than L2): the lines
    // are requested for writing while the kernel runs, not missed one by one after it.
    for (int64_t b = 0; b < x.tokens(); ++b) __builtin_prefetch(y + b * y_stride + r0, 1);
    k.dot_float_lanes(w.type, w.row(r0), row_stride, rows, x.data(), x.groups(), w.cols, out);
    for (int64_t b = 0; b < x.tokens(); ++b)
      for (int r = 0; r < rows; ++r) y[b * y_stride + r0 + r] = out[r * width + b];
  }
}

}  // namespace strata
