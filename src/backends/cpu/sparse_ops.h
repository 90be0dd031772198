// Neuron-aware operators: the FFN computed over a list of neuron ids instead of all n_ff rows.
//   gather: y[b][k] = W[ids[k]] . x_b   (gate and up: one weight row per neuron)
//   axpy:   out_b  = sum_k c[b][k] * Wt[ids[k]], skipping c == 0   (down, stored transposed so a
//           neuron's n_embd output weights are one contiguous row, as PowerInfer's ffn_down_t)
// Results are bit-identical for any thread count: gather computes every (row, token) with the
// same dot_row call; axpy sums each bucket of kAxpyBucket neuron ids into its own partial vector
// (the buckets fixed by the ids, not by the thread count or the rest of the list), then adds
// the partials in bucket order. No two threads write the same memory, so
// nothing can race (PowerInfer's unlocked `dst += acc` did; see docs), and the reduction order
// never changes.
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "core/thread_pool.h"
#include "tensor/matrix.h"

namespace strata {

// {w, y, y_stride}: y[b * y_stride + k] for token b and the k-th id (y_stride >= ids.size()).
using GatherJob = RowsJob;

// For every job: y[b][k] = w.row(ids[k]) . x[b]. With `need` (row-major [batch][need_stride],
// indexed by the k of the id list), products where need[b][k] == 0 are skipped and written as 0.
void gather_matmat(const CpuKernels& kernels, std::span<const GatherJob> jobs,
                   std::span<const int32_t> ids, std::span<const PreparedInput> x, ThreadPool& pool,
                   const uint8_t* need = nullptr, int64_t need_stride = 0);

// out[b][0..wt.cols) = sum over k of c[b * c_stride + k] * wt.row(ids[k]), terms with c == 0
// skipped (their rows are never read). `out` (stride out_stride) is overwritten. `neurons`: the
// neuron id of each entry when `ids` are not neuron ids (neuron cache slots); they decide the
// order of additions (buckets of kAxpyBucket ids), so a neuron cache gives the RAM result.
void axpy_rows(const CpuKernels& kernels, const MatrixView& wt, std::span<const int32_t> ids,
               const float* c, int64_t c_stride, int64_t batch, float* out, int64_t out_stride,
               ThreadPool& pool, std::span<const int32_t> neurons = {});

// Rows per kernel call: y stays in registers across a group.
inline constexpr int kAxpyGroup = 8;
// Neuron ids [j * kAxpyBucket, (j + 1) * kAxpyBucket) are bucket j: a token's active rows of a
// bucket are summed in list order into the bucket's own partial vector, and the partials are
// added in bucket order (ascending lists). Fixed by the neuron ids alone, so the sum of a
// token's active neurons is the same whatever else the list holds and whoever computes it.
inline constexpr int64_t kAxpyBucket = 256;
// Scratch of one axpy_rows call at most (partial vectors and row lists; the calling thread
// keeps it for the next call): a large batch goes in chunks of tokens that fit.
inline constexpr uint64_t kAxpyScratchBytes = uint64_t{8} << 20;
// The most scratch axpy_rows keeps for batches of up to `batch` tokens over lists of up to
// `n_ids` ids (ascending, or two ascending runs: a neuron cache's passes) and rows of `cols`.
uint64_t axpy_scratch_bound(int64_t batch, int64_t n_ids, int64_t cols);

// out[begin, end) += sum over r of c[r] * wt.row(rows[r])[begin, end), for n_rows <= kAxpyGroup
// rows, added in order (begin a multiple of 64, of 256 for K-quants, or the start of the row).
// next_rows (n_next <= kAxpyGroup): the rows of the caller's next call, prefetched meanwhile.
void axpy_row_slice(const CpuKernels& kernels, const MatrixView& wt, const int64_t* rows,
                    const float* c, int n_rows, float* out, int64_t begin, int64_t end,
                    const int64_t* next_rows = nullptr, int n_next = 0);

}  // namespace strata
