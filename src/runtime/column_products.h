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
#include <vector>

#include "backends/backend.h"
#include "runtime/input_sparsifier.h"
#include "runtime/workspace.h"
#include "tiers/flash_column_store.h"

namespace strata {

class ColumnProducts {
 public:
  // A column-bundled model's columns on flash (tiers/flash_column_store.h): fetched into the
  // store's cache (in passes when they outnumber it) and summed from its slots, in the order of
  // the column ids, so one pass gives the bits the same columns in memory give.
  struct FlashColumns {
    FlashColumnStore* store = nullptr;
    FlashColumnStore::Part part = FlashColumnStore::Part::GateUp;
    int64_t token = 0;  // the batch's last token (the caches' window)
  };
  // y[b * y_stride + r] = sum over the listed columns j of x_b[j] * columns.row(j)[r]; the
  // columns from memory, or from `flash` when set (columns then unused).
  struct Job {
    const MatrixView* columns;
    float* y;
    int64_t y_stride;
    const FlashColumns* flash = nullptr;
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
  // The same from the flash tier's gate/up column bundles (`fused` gives their width).
  int64_t run_fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                    const FlashColumns& flash, std::span<const Part> parts);

 private:
  int64_t fused(int64_t layer, int point, float* x, int64_t n, int64_t width, const Job& job,
                int64_t cols, std::span<const Part> parts);
  void from_flash(int64_t layer, const Job& job, std::span<const int32_t> ids, int64_t n,
                  int64_t width);

  Backend& be_;
  Workspace& ws_;
  InputSparsifier& sparsifier_;
  uint64_t* counters_;
  int64_t stride_;
  // Flash: one pass's cache slots, a later pass's sums, and for products in passes the columns
  // (positions in the list, ids, values) in the order the passes take them.
  std::vector<int32_t> slots_;
  std::vector<float> partial_;
  std::vector<int64_t> order_;
  struct Unit {
    int64_t first;  // in order_
    bool held;
  };
  std::vector<Unit> units_;
  std::vector<int32_t> ordered_ids_;
  std::vector<float> ordered_values_;
};

}  // namespace strata
