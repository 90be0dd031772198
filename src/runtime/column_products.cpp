#include "runtime/column_products.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

int64_t ColumnProducts::run(int64_t layer, int point, float* x, int64_t n, int64_t width,
                            std::span<const Job> jobs, FfnActivation act) {
  sparsifier_.apply(be_, layer, point, x, n, counters_ + layer * stride_, act, ws_.col_mask);
  uint64_t selected = 0;
  const int64_t count = be_.select_union(ws_.col_mask, n, width, ws_.col_ids, ws_.col_need, &selected);
  const std::span<const int32_t> ids(ws_.col_ids, static_cast<size_t>(count));
  be_.select_columns(x, ids, n, width, ws_.col_values);
  for (const Job& j : jobs)
    be_.axpy(*j.columns, ids, ws_.col_values, width, n, j.y, j.y_stride, {}, width);
  return count;
}

int64_t ColumnProducts::run_fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                                  const MatrixView& fused, std::span<const Part> parts) {
  int64_t total = 0;
  for (const Part& part : parts) total += part.width;
  if (total != fused.cols)
    fail("fused column products: parts of {} values for a copy of {}", total, fused.cols);
  const Job job{&fused, ws_.col_fused, fused.cols};
  const int64_t count = run(layer, point, x, n, width, std::span(&job, 1));
  // Host memory (the column path runs on the CPU backend only: use_input_columns).
  for (int64_t b = 0; b < n; ++b) {
    const float* from = ws_.col_fused + b * fused.cols;
    for (const Part& part : parts) {
      std::copy(from, from + part.width, part.y + b * part.width);
      from += part.width;
    }
  }
  return count;
}

}  // namespace strata
