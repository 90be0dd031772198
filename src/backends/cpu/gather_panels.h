// A gathered batch (a prompt's union of neurons) splits its rows two ways. A row most of the
// batch needs goes through a panel: up to 16 such rows copied side by side (interleaved where
// the type's group kernels read that), every token of the batch multiplied by the batched
// kernels (AMX tiles, register tiles, group kernels: matmat_rows), and the products of the
// tokens that do not need the row written as zero. A row few tokens need is computed token by
// token for those tokens only (sparse_ops.cpp), as in decode. Which way a row goes depends on the
// need mask alone, so the results are the same at any thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "tensor/dtype.h"

namespace strata {

// Panels are for prompts: a batch of at least this many tokens.
inline constexpr int64_t kPanelMinBatch = 4;
// Rows per panel (a group of the interleaved layout, a tile's rows).
inline constexpr int64_t kPanelRows = 16;

// Whether a row that `needing` of `batch` tokens need goes through a panel: when the panel's
// products for tokens that do not need it cost less than the single products it replaces, i.e.
// needing >= crossover * batch, `crossover` being the cost of a product in a panel over that of
// a single (gathered) dot product.
bool through_panel(int64_t needing, int64_t batch, double crossover);

// That cost ratio for the CPU's kernels and weights of `type` (measured: docs/PERFORMANCE.md,
// "Prompts on the sparse paths"); above 1 where no batched kernel beats the single ones.
double panel_crossover(DType type, const BatchForms& forms);

// Panels copy rows of the file's layout or of groups interleaved at load.
bool panel_reads(Layout layout);

// The positions k of an id list of n_ids entries, each way; `needing[k]`: the tokens that need
// entry k (left empty for a batch below kPanelMinBatch: all single). `need`: row-major [batch][need_stride] over k (null: every token needs every entry).
struct GatherSplit {
  std::vector<int32_t> panel, single, needing;
};
void split_gather(const uint8_t* need, int64_t need_stride, int64_t n_ids, int64_t batch,
                  double crossover, GatherSplit& out);

// The most memory gather_matmat keeps for batches of up to `batch` tokens over id lists of up
// to `n_ids` entries of rows of `cols` values, on a pool of `threads`: the calling thread's
// split and work weights, each thread's panel and its products.
uint64_t gather_scratch_bytes(int64_t batch, int64_t n_ids, int64_t cols, int threads);

// y[b * y_stride + k] = w.row(ids[k]) . x[b] for the positions k in `positions` (at most
// kPanelRows) and every token b, written as 0 where need[b][k] == 0 (need may be null).
void gather_panel(const CpuKernels& kernels, const MatrixView& w, std::span<const int32_t> ids,
                  std::span<const int32_t> positions, std::span<const PreparedInput> x,
                  const BatchForms& forms, const uint8_t* need, int64_t need_stride, float* y,
                  int64_t y_stride);

}  // namespace strata
