#include "kernels/cpu/fused_ffn.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/sparse_ops.h"

namespace strata {

namespace {

constexpr int kGroup = 4;  // neurons per step (the four-row Q4_0 kernel's width)

// out[r] = w.row(rows[r]) . x for n <= kGroup rows, requesting `next` (n_next pointers) as they
// go: plain Q4_0 groups of four through the four-row kernel, anything else row by row (equal
// bit for bit, as in gather_matmat).
void dot_group(const CpuKernels& k, const MatrixView& w, const int32_t* rows, int n,
               const PreparedInput& x, float* out, const void* const* next, int n_next) {
  if (n == kGroup && w.type == DType::Q4_0 && w.layout == Layout::Rows) {
    const BlockQ4_0* p[kGroup];
    for (int r = 0; r < kGroup; ++r) p[r] = reinterpret_cast<const BlockQ4_0*>(w.row(rows[r]));
    k.gather_dot4_q4_0(p, x.q8(), w.cols, out, next, n_next);
    return;
  }
  for (int r = 0; r < n; ++r)
    out[r] = dot_row_gathered(k, w, rows[r], x, r < n_next ? next[r] : nullptr);
}

}  // namespace

uint64_t fused_ffn_token(const CpuKernels& kernels, const FusedFfnWeights& w,
                         std::span<const int32_t> ids, const PreparedInput& x,
                         const FusedFfnActivation& act, float* h, float* out, ThreadPool& pool,
                         std::span<const int32_t> neurons) {
  const MatrixView& up = *w.up;
  const MatrixView& down = *w.down_t;
  const MatrixView& first = w.gate != nullptr ? *w.gate : up;  // the rows a step starts with
  if (up.cols != x.size() || first.cols != x.size())
    fail("fused FFN: rows of {} elements for an input of {}", up.cols, x.size());
  const int64_t cols = down.cols, n_ids = static_cast<int64_t>(ids.size());
  if (!neurons.empty() && neurons.size() != ids.size())
    fail("fused FFN: {} neuron ids for {} rows", neurons.size(), ids.size());
  const std::span<const int32_t> keys = neurons.empty() ? ids : neurons;
  // Items: runs of consecutive entries in the same bucket of kAxpyBucket neuron ids, as in
  // axpy_rows; each sums into its own partial. Named through references: the lambdas run on
  // pool threads (see axpy_rows).
  thread_local std::vector<float> partials_storage;
  thread_local std::vector<uint8_t> used_storage;
  thread_local std::vector<uint64_t> nonzero_storage;
  thread_local std::vector<int64_t> ends_storage;
  std::vector<float>& partials = partials_storage;
  std::vector<uint8_t>& used = used_storage;  // per item: any non-zero activation
  std::vector<uint64_t>& nonzero = nonzero_storage;
  std::vector<int64_t>& ends = ends_storage;  // per item: one past its last entry
  ends.clear();
  for (int64_t k = 1; k <= n_ids; ++k)
    if (k == n_ids || keys[static_cast<size_t>(k)] / kAxpyBucket !=
                          keys[static_cast<size_t>(k - 1)] / kAxpyBucket)
      ends.push_back(k);
  const int64_t n_items = static_cast<int64_t>(ends.size());
  if (partials.size() < static_cast<size_t>(n_items * cols)) partials.resize(n_items * cols);
  used.assign(static_cast<size_t>(n_items), 0);
  nonzero.assign(static_cast<size_t>(pool.size()), 0);

  pool.parallel_for_weighted(ends, [&](int64_t i0, int64_t i1, int thread) {
    const int64_t k_end = ends[static_cast<size_t>(i1 - 1)];
    uint64_t count = 0;
    for (int64_t i = i0; i < i1; ++i) {
      float* p = partials.data() + i * cols;
      std::fill(p, p + cols, 0.0f);
      const int64_t item_end = ends[static_cast<size_t>(i)];
      for (int64_t k = i == 0 ? 0 : ends[static_cast<size_t>(i - 1)]; k < item_end; k += kGroup) {
        const int n = static_cast<int>(std::min<int64_t>(kGroup, item_end - k));
        const int32_t* rows = ids.data() + k;
        const void* next[kGroup];
        float g[kGroup], u[kGroup], hv[kGroup];
        // gate (requesting up) -> up (requesting the down rows that may be used) -> down
        // (requesting the next step's first rows).
        if (w.gate != nullptr) {
          for (int r = 0; r < n; ++r) next[r] = up.row(rows[r]);
          dot_group(kernels, *w.gate, rows, n, x, g, next, n);
        }
        int n_down = 0;
        for (int r = 0; r < n; ++r)
          if (w.gate == nullptr || !act.gate_decides || g[r] > 0.0f)
            next[n_down++] = down.row(rows[r]);
        dot_group(kernels, up, rows, n, x, u, next, n_down);
        act.fn(act.ctx, w.gate != nullptr ? g : nullptr, u, hv, n);
        const uint8_t* active[kGroup];
        float coef[kGroup];
        int m = 0;
        for (int r = 0; r < n; ++r) {
          h[k + r] = hv[r];
          if (hv[r] != 0.0f) {  // zero: the down row is never read
            active[m] = down.row(rows[r]);
            coef[m++] = hv[r];
          }
        }
        if (m == 0) continue;
        used[static_cast<size_t>(i)] = 1;
        count += static_cast<uint64_t>(m);
        int n_next = 0;
        for (int64_t j = k + n; j < std::min(k_end, k + n + kGroup); ++j)
          next[n_next++] = first.row(ids[static_cast<size_t>(j)]);
        axpy_pointers(kernels, down.type, active, coef, m, p, cols, next, n_next);
      }
    }
    nonzero[static_cast<size_t>(thread)] = count;
  });
  // The used items' partials added in item order, over column slices (as axpy_rows does).
  constexpr int64_t kSlice = 256;
  const int64_t n_slices = (cols + kSlice - 1) / kSlice;
  pool.parallel_for(n_slices, [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t begin = j * kSlice, end = std::min(cols, begin + kSlice);
      bool any = false;
      for (int64_t i = 0; i < n_items; ++i) {
        if (used[static_cast<size_t>(i)] == 0) continue;
        const float* p = partials.data() + i * cols;
        if (!any)
          std::copy(p + begin, p + end, out + begin);
        else
          for (int64_t e = begin; e < end; ++e) out[e] += p[e];
        any = true;
      }
      if (!any) std::fill(out + begin, out + end, 0.0f);
    }
  });
  uint64_t total = 0;
  for (uint64_t v : nonzero) total += v;
  return total;
}

}  // namespace strata
