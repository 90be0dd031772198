#include "runtime/column_products.h"

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

}  // namespace strata
