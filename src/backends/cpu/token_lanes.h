// Prompt batches of float weights (F32, F16, BF16) with a lane per token: the batch's
// activations stored by column, `lanes` tokens side by side (the kernel table's token_lanes),
// so a kernel broadcasts each weight over whole vectors of tokens instead of splitting each
// dot product over lanes and reducing it. Made once per batched product and shared by its
// threads (as the AMX activation forms are).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "tensor/matrix.h"

namespace strata {

class TokenLaneActivations {
 public:
  // xs: the batch's activation vectors, `cols` values each; tokens past the batch up to a whole
  // group of `lanes` are zeros.
  void prepare(std::span<const float* const> xs, int64_t cols, int lanes);
  // The tokens are the columns of `m` (row-major, `rows` x `tokens`): each token's `rows`
  // values are one column, so the lanes are m's rows copied (no transposition).
  void prepare_columns(const float* m, int64_t rows, int64_t tokens, int lanes);
  const float* data() const { return xt_.data()->v; }
  int groups() const { return groups_; }
  int lanes() const { return lanes_; }
  int64_t tokens() const { return tokens_; }
  int64_t cols() const { return cols_; }
  // What prepare holds for `tokens` activations of `cols` values (lanes of at most 16), and
  // token_lane_rows' results of 16 rows on each of `threads` threads.
  static uint64_t bytes(int64_t tokens, int64_t cols, int threads) {
    const auto width = static_cast<uint64_t>((tokens + 15) / 16 * 16);
    return (width * static_cast<uint64_t>(cols) + 16 * width * static_cast<uint64_t>(threads)) *
           sizeof(float);
  }

 private:
  struct alignas(64) Line {  // vector loads that never straddle two cache lines
    float v[16];
  };
  std::vector<Line> xt_;
  int groups_ = 0, lanes_ = 0;
  int64_t tokens_ = 0, cols_ = 0;
};

// Whether a batch of `batch` tokens goes through token lanes of `lanes`: at least one whole
// group (a shorter batch would leave most lanes idle; the row tiles take it).
bool uses_token_lanes(int64_t batch, int lanes);

// y[b * y_stride + r] = W[r] . x_b for rows [lo, hi) of a float-type matrix and every token of
// `x`, through k.dot_float_lanes 16 rows at a time.
void token_lane_rows(const CpuKernels& k, const MatrixView& w, int64_t lo, int64_t hi,
                     const TokenLaneActivations& x, float* y, int64_t y_stride);

}  // namespace strata
