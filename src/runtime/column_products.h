// Input-sparse products (TEAL's kernels, as backend ops): the products of the matrices that read
// one thresholded input, through their column-major copies (Model::columns, ffn_down_t), reading
// only the columns of the input's non-zero values. The input is thresholded by the session's
// sparsifier (which marks the non-zero values), the union of the batch's marked columns listed
// (select_union), their values compacted (select_columns), and each matrix's listed columns
// summed per token (axpy, which skips a token's zero values). Equal to the dense product of the
// thresholded input within rounding (the additions run in another order), the same for any
// thread count (axpy's buckets).
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"
#include "runtime/input_sparsifier.h"
#include "runtime/workspace.h"

namespace strata {

class ColumnProducts {
 public:
  // y[b * y_stride + r] = sum over the listed columns j of x_b[j] * columns.row(j)[r].
  struct Job {
    const MatrixView* columns;
    float* y;
    int64_t y_stride;
  };
  // `counters`: the layer's sparsity counters are at counters + layer * stride.
  ColumnProducts(Backend& backend, Workspace& ws, InputSparsifier& sparsifier, uint64_t* counters,
                 int64_t stride)
      : be_(backend), ws_(ws), sparsifier_(sparsifier), counters_(counters), stride_(stride) {}

  // Thresholds point `point` of layer l (x: n rows of `width`, overwritten) and runs the jobs.
  // Returns the number of columns read (the union).
  int64_t run(int64_t layer, int point, float* x, int64_t n, int64_t width,
              std::span<const Job> jobs, FfnActivation act = FfnActivation::SwiGLU);

  // The same through a fused column copy (LayerColumns::attn_qkv, ffn_gate_up), its products
  // then split into the parts' outputs in order: part i's y[b * width_i + r].
  struct Part {
    float* y;
    int64_t width;
  };
  int64_t run_fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                    const MatrixView& fused, std::span<const Part> parts);

 private:
  Backend& be_;
  Workspace& ws_;
  InputSparsifier& sparsifier_;
  uint64_t* counters_;
  int64_t stride_;
};

}  // namespace strata
