// Neuron-aware operators: the FFN computed over a list of neuron ids instead of all n_ff rows.
//   gather: y[b][k] = W[ids[k]] . x_b   (gate and up: one weight row per neuron)
//   axpy:   out_b  = sum_k c[b][k] * Wt[ids[k]], skipping c == 0   (down, stored transposed so a
//           neuron's n_embd output weights are one contiguous row, as PowerInfer's ffn_down_t)
// Both read each selected weight row once for the whole batch. Results are bit-identical for any
// thread count: gather computes every (row, token) with the same dot_row call, and axpy splits
// the *output columns* across threads (in slices of 64 elements), so each output element is one
// thread's sum over the ids in list order. No partial sums cross threads, so nothing needs a
// reduction and nothing can race (PowerInfer's unlocked `dst += acc` did; see docs).
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matvec.h"
#include "tensor/matrix.h"

namespace strata {

struct GatherJob {
  const MatrixView* w;
  float* y;          // y[b * y_stride + k] for token b and the k-th id
  int64_t y_stride;  // >= ids.size()
};

// For every job: y[b][k] = w.row(ids[k]) . x[b]. With `need` (row-major [batch][need_stride],
// indexed by the k of the id list), products where need[b][k] == 0 are skipped and written as 0.
void gather_matmat(const CpuKernels& kernels, std::span<const GatherJob> jobs,
                   std::span<const int32_t> ids, std::span<const PreparedInput> x,
                   ThreadPool& pool, const uint8_t* need = nullptr, int64_t need_stride = 0);

// out[b][0..wt.cols) = sum over k in list order of c[b * c_stride + k] * wt.row(ids[k]), terms
// with c == 0 skipped. `out` (stride out_stride) is overwritten.
void axpy_rows(const CpuKernels& kernels, const MatrixView& wt, std::span<const int32_t> ids,
               const float* c, int64_t c_stride, int64_t batch, float* out, int64_t out_stride,
               ThreadPool& pool);

// One row, one slice of columns [begin, end) (begin a multiple of the type's block size).
void axpy_row_slice(const CpuKernels& kernels, const MatrixView& wt, int64_t row, float c,
                    float* out, int64_t begin, int64_t end);

}  // namespace strata
