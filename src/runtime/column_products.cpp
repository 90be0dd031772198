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
  // One pass: the columns in id order (the column copies' order of additions).
  if (count <= capacity) {
    const MatrixView view = store.fetch(layer, part, ids, slots_.data(), job.flash->token, 0, n);
    be_.axpy(view, std::span<const int32_t>(slots_.data(), ids.size()), ws_.col_values, width, n,
             job.y, job.y_stride, ids, width);
    return;
  }
  // Passes: the columns the cache holds first, then the others, each ascending, cut into passes
  // of the cache's size. In id order every pass would evict the columns the next token's first
  // passes want (a scan longer than the cache: a dense FFN from a 35% cache hit none); this way
  // a token starts with what the last one left. A pass never splits the columns of one pass
  // unit (quantized bundles: the inputs the products quantize together), so the input is
  // quantized as in one pass; a unit counts as held when any of its columns is.
  const int64_t unit = store.pass_unit(layer, part);
  order_.clear();
  units_.clear();  // where each unit starts in order_, and whether it is held
  for (const bool held : {true, false})
    for (int64_t k = 0; k < count;) {
      int64_t end = k + 1;
      while (end < count &&
             ids[static_cast<size_t>(end)] / unit == ids[static_cast<size_t>(k)] / unit)
        ++end;
      bool any = false;
      for (int64_t i = k; i < end && !any; ++i)
        any = store.resident(layer, part, ids[static_cast<size_t>(i)]);
      if (any == held) {
        units_.push_back({static_cast<int64_t>(order_.size()), held});
        for (int64_t i = k; i < end; ++i) order_.push_back(i);
      }
      k = end;
    }
  units_.push_back({count, false});
  ordered_ids_.resize(static_cast<size_t>(count));
  ordered_values_.resize(static_cast<size_t>(n * count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = order_[static_cast<size_t>(i)];
    ordered_ids_[static_cast<size_t>(i)] = ids[static_cast<size_t>(k)];
    for (int64_t b = 0; b < n; ++b) ordered_values_[b * count + i] = ws_.col_values[b * width + k];
  }
  partial_.resize(static_cast<size_t>(n * cols));
  int pass = 0;
  for (size_t u = 0; u + 1 < units_.size(); ++pass) {
    // Whole units while they fit, none from both the held and the other columns.
    const int64_t k0 = units_[u].first;
    size_t v = u + 1;
    while (v + 1 < units_.size() && units_[v].held == units_[u].held &&
           units_[v + 1].first - k0 <= capacity)
      ++v;
    const int64_t m = units_[v].first - k0;
    u = v;
    const std::span<const int32_t> chunk(ordered_ids_.data() + k0, static_cast<size_t>(m));
    const MatrixView view =
        store.fetch(layer, part, chunk, slots_.data(), job.flash->token, pass, n);
    const std::span<const int32_t> slots(slots_.data(), static_cast<size_t>(m));
    float* out = pass == 0 ? job.y : partial_.data();
    const int64_t out_stride = pass == 0 ? job.y_stride : cols;
    be_.axpy(view, slots, ordered_values_.data() + k0, count, n, out, out_stride, chunk, width);
    // A later pass's sums added to the earlier ones' (host memory: the flash tier's products
    // run on the CPU backend).
    if (pass > 0)
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
  // In the backend's memory (a device's, where its layers take the column path).
  for (int64_t b = 0; b < n; ++b) {
    const float* from = ws_.col_fused + b * cols;
    for (const Part& part : parts) {
      be_.copy(part.y + b * part.width, from, static_cast<uint64_t>(part.width) * sizeof(float));
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
