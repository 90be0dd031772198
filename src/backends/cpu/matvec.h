// Matrix-vector products y = W x over any computable weight type. The input is prepared once
// (quantized to Q8_0 blocks when a quantized weight will read it) and then shared by every
// product that reads the same vector (q/k/v, gate/up). Rows are split across the thread pool;
// each row's dot product is computed the same way whatever the split, so results do not depend
// on the thread count.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"
#include "tensor/matrix.h"

namespace strata {

// What a product with the weight type reads (the type table's activation form).
inline bool needs_q8_input(DType type) {
  return dtype_info(type).input == ActivationForm::Q8_0;
}
inline bool needs_q8k_input(DType type) {
  return dtype_info(type).input == ActivationForm::Q8_K;
}
// The types the AMX tile products take (amx_matmat.h).
inline bool amx_reads(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0;
}

class PreparedInput {
 public:
  // need_q8: Q8_0 blocks for Q8_0/Q4_0 readers; need_q8k: Q8_K super-blocks for K-quant ones.
  void prepare(const CpuKernels& kernels, const float* x, int64_t n, bool need_q8,
               bool need_q8k = false);
  // What a reader of `type` needs.
  void prepare_for(const CpuKernels& kernels, const float* x, int64_t n, DType type) {
    prepare(kernels, x, n, needs_q8_input(type), needs_q8k_input(type));
  }
  const float* f32() const { return x_; }
  const Q8Activation& q8() const { return q8_view_; }
  const BlockQ8_K* q8k() const { return q8k_.data(); }
  int64_t size() const { return n_; }

 private:
  const float* x_ = nullptr;
  int64_t n_ = 0;
  std::vector<BlockQ8_K> q8k_;
  std::vector<BlockQ8_0> q8_;
  std::vector<float> q8_scale_, q8_scaled_sum_, q4_lane_offsets_, q8_lane_scale_, q8_1_sum_;
  std::vector<int8_t> q8_qs_;
  std::vector<uint8_t> q8_biased_;
  std::vector<int32_t> q8_minus_8_sum_;
  Q8Activation q8_view_{};
};

// One row's product. Rows of an interleaved Q4_0 matrix (Layout::Interleaved16) are unpacked and
// multiplied by the scalar kernel, which equals the group kernels bit for bit (slow; the
// engine only interleaves matrices it multiplies whole).
float dot_row(const CpuKernels& kernels, const MatrixView& w, int64_t row, const PreparedInput& x);
// The same for a row read out of order (the sparse gather): the gather_dot_* kernels, which do
// not prefetch past the row but request `next` (the caller's next row, may be null) as they go.
// Equal to dot_row bit for bit.
float dot_row_gathered(const CpuKernels& kernels, const MatrixView& w, int64_t row,
                       const PreparedInput& x, const void* next = nullptr);

// y[r] = W[r] . x for r in [begin, end). Interleaved matrices go a group of 16 rows at a time.
void matvec_rows(const CpuKernels& kernels, const MatrixView& w, const PreparedInput& x, float* y,
                 int64_t begin, int64_t end);

struct MatVecJob {
  const MatrixView* w;
  float* y;
};

// Several products over the same input in one parallel pass (one barrier instead of several).
void matvec_multi(const CpuKernels& kernels, std::initializer_list<MatVecJob> jobs,
                  const PreparedInput& x, ThreadPool& pool);

// y_b = W x_b for a batch of inputs: each weight row is read once and multiplied with every
// input while it is in cache, so a batch costs about one pass over the weights. Output b of job
// j goes to j.y + b * j.y_stride. Each product is the same dot_row call as in matvec, so results
// are bit-identical to running the inputs one at a time -- except for Q8_0/Q4_0 weights in the
// file's row layout and batches of at least kAmxMinBatch tokens on CPUs with AMX, which use
// tile products (amx_matmat.h) that equal the scalar reference kernel bit for bit and the SIMD
// dot kernels within rounding. Interleaved Q4_0 equals the scalar reference on every path.
inline constexpr int64_t kAmxMinBatch = 4;
// The most tokens one batched kernel call takes; matmat_multi and the gather slice larger
// batches.
inline constexpr int64_t kBatchKernelTokens = 64;

using MatMatJob = RowsJob;  // {w, y, y_stride}: backend.h's job, so ops pass them through
void matmat_multi(const CpuKernels& kernels, std::span<const MatMatJob> jobs,
                  std::span<const PreparedInput> x, ThreadPool& pool);
inline void matmat_multi(const CpuKernels& kernels, std::initializer_list<MatMatJob> jobs,
                         std::span<const PreparedInput> x, ThreadPool& pool) {
  matmat_multi(kernels, std::span<const MatMatJob>(jobs.begin(), jobs.size()), x, pool);
}

// A batch's activations in the forms its batched kernels read, made once per product and shared
// by its threads: each token's Q8_0 view for AMX int8 tiles, the BF16 split for F16 weights on
// AMX-BF16 (the calling thread's buffer, valid until its next batch_forms).
class AmxBf16Activations;
class AmxInt8Activations;
class TokenLaneActivations;
struct BatchForms {
  bool amx_int8 = false;
  std::vector<Q8Activation> q8;
  const AmxInt8Activations* int8 = nullptr;  // amx_int8 and `packed_int8`: tile B, packed once
  const AmxBf16Activations* bf16 = nullptr;  // F16 weights on AMX-BF16 tiles
  const TokenLaneActivations* lanes = nullptr;  // the other float weights (token_lanes.h)
};
// `types`: the weight types of the batch's products. `packed_int8`: pack the activations for
// AMX int8 tiles of rows in the file's layout once (products over many short row ranges).
BatchForms batch_forms(const CpuKernels& kernels, std::span<const PreparedInput> x,
                       std::span<const DType> types, bool packed_int8 = false);

// y[b * y_stride + r] = W[r] . x[b] for rows [lo, hi) of w and every input: one job's part of
// matmat_multi, for callers that split the rows themselves.
void matmat_rows(const CpuKernels& kernels, const MatrixView& w, int64_t lo, int64_t hi,
                 std::span<const PreparedInput> x, const BatchForms& forms, float* y,
                 int64_t y_stride);

// Convenience for a single product from an f32 vector.
void matvec(const CpuKernels& kernels, const MatrixView& w, const float* x, float* y,
            ThreadPool& pool);

}  // namespace strata
