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
  for (const Job& j : jobs) {
    if (j.flash != nullptr)
      from_flash(layer, j, ids, n, width);
    else
      be_.axpy(*j.columns, ids, ws_.col_values, width, n, j.y, j.y_stride, {}, width);
  }
  return count;
}

void ColumnProducts::from_flash(int64_t layer, const Job& job, std::span<const int32_t> ids,
                                int64_t n, int64_t width) {
  FlashColumnStore& store = *job.flash->store;
  const FlashColumnStore::Part part = job.flash->part;
  const int64_t cols = store.values(part), capacity = store.capacity(layer, part);
  const auto count = static_cast<int64_t>(ids.size());
  if (count == 0) {
    for (int64_t b = 0; b < n; ++b) std::fill_n(job.y + b * job.y_stride, cols, 0.0f);
    return;
  }
  slots_.resize(static_cast<size_t>(std::min(count, capacity)));
  int pass = 0;
  for (int64_t k0 = 0; k0 < count; k0 += capacity, ++pass) {
    const int64_t m = std::min(capacity, count - k0);
    const std::span<const int32_t> chunk = ids.subspan(static_cast<size_t>(k0), static_cast<size_t>(m));
    const MatrixView view =
        store.fetch(layer, part, chunk, slots_.data(), job.flash->token, pass, n);
    const std::span<const int32_t> slots(slots_.data(), static_cast<size_t>(m));
    if (k0 == 0) {
      be_.axpy(view, slots, ws_.col_values, width, n, job.y, job.y_stride, chunk, width);
      continue;
    }
    // A later pass: its sums added to the earlier passes' (host memory: the flash tier's
    // products run on the CPU backend).
    partial_.resize(static_cast<size_t>(n * cols));
    be_.axpy(view, slots, ws_.col_values + k0, width, n, partial_.data(), cols, chunk, width);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t r = 0; r < cols; ++r) job.y[b * job.y_stride + r] += partial_[b * cols + r];
  }
}

int64_t ColumnProducts::fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                              const Job& job, int64_t cols, std::span<const Part> parts) {
  int64_t total = 0;
  for (const Part& part : parts) total += part.width;
  if (total != cols) fail("fused column products: parts of {} values for a copy of {}", total, cols);
  const int64_t count = run(layer, point, x, n, width, std::span(&job, 1));
  // Host memory (the column path runs on the CPU backend only: use_input_columns).
  for (int64_t b = 0; b < n; ++b) {
    const float* from = ws_.col_fused + b * cols;
    for (const Part& part : parts) {
      std::copy(from, from + part.width, part.y + b * part.width);
      from += part.width;
    }
  }
  return count;
}

int64_t ColumnProducts::run_fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                                  const MatrixView& fused_copy, std::span<const Part> parts) {
  const Job job{&fused_copy, ws_.col_fused, fused_copy.cols};
  return fused(layer, point, x, n, width, job, fused_copy.cols, parts);
}

int64_t ColumnProducts::run_fused(int64_t layer, int point, float* x, int64_t n, int64_t width,
                                  const FlashColumns& flash, std::span<const Part> parts) {
  const int64_t cols = flash.store->values(flash.part);
  const Job job{nullptr, ws_.col_fused, cols, &flash};
  return fused(layer, point, x, n, width, job, cols, parts);
}

}  // namespace strata
