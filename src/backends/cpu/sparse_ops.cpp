#include "backends/cpu/sparse_ops.h"

#include <algorithm>

#include "core/error.h"
#include "tensor/dtype.h"

namespace strata {

namespace {

// Plain Q4_0 rows go through the four-row kernel (it loads the activation once for four rows;
// a row alone is bound by those loads). Its rows equal gather_dot_q4_0's bit for bit.
bool gathers_by_four(std::span<const GatherJob> jobs) {
  for (const GatherJob& job : jobs)
    if (job.w->type != DType::Q4_0 || job.w->layout != Layout::Rows) return false;
  return true;
}

// The kernel call behind axpy_row_slice, on row pointers (n elements from each; n_rows and
// n_next <= kAxpyGroup): y[0, n) += sum over r of c[r] * p[r][0, n), while `next` are requested.
void axpy_pointers(const CpuKernels& kernels, DType type, const uint8_t* const* p, const float* c,
                   int n_rows, float* y, int64_t n, const void* const* next, int n_next) {
  switch (type) {
    case DType::F32:
      kernels.axpy_f32(reinterpret_cast<const float* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::F16:
      kernels.axpy_f16(reinterpret_cast<const uint16_t* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::BF16:
      kernels.axpy_bf16(reinterpret_cast<const uint16_t* const*>(p), c, n_rows, y, n, next, n_next);
      break;
    case DType::Q8_0:
      kernels.axpy_q8_0(reinterpret_cast<const BlockQ8_0* const*>(p), c, n_rows, y, n, next,
                        n_next);
      break;
    case DType::Q4_0:
      kernels.axpy_q4_0(reinterpret_cast<const BlockQ4_0* const*>(p), c, n_rows, y, n, next,
                        n_next);
      break;
    default:
      fail("axpy over a {} matrix is not supported", dtype_name(type));
  }
}

}  // namespace

void gather_matmat(const CpuKernels& kernels, std::span<const GatherJob> jobs,
                   std::span<const int32_t> ids, std::span<const PreparedInput> x, ThreadPool& pool,
                   const uint8_t* need, int64_t need_stride) {
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  const int64_t batch = static_cast<int64_t>(x.size());
  const int64_t n_jobs = static_cast<int64_t>(jobs.size());
  if (n_ids == 0) return;
  // Work items are (group of `group` consecutive ids, job), jobs innermost: each thread takes a
  // contiguous run of the (sorted) neuron list and reads every job's rows for it.
  const int64_t group = gathers_by_four(jobs) ? 4 : 1;
  const int64_t n_groups = (n_ids + group - 1) / group;
  pool.parallel_for(n_jobs * n_groups, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const GatherJob& job = jobs[static_cast<size_t>(i % n_jobs)];
      const int64_t k0 = (i / n_jobs) * group, k1 = std::min(n_ids, k0 + group);
      // The next item's rows are elsewhere in memory: request them now. (The gather_dot_*
      // kernels do not prefetch past a row: that would read a neighbour nobody asked for.) The
      // four-row kernel requests them itself, spread over its blocks.
      const void* next[4];
      int n_next = 0;
      if (group == 1 && i + 1 < i1) {
        next[n_next++] = jobs[static_cast<size_t>((i + 1) % n_jobs)].w->row(
            ids[static_cast<size_t>((i + 1) / n_jobs)]);
      } else if (group == 4 && i + 1 < i1) {
        const MatrixView& nw = *jobs[static_cast<size_t>((i + 1) % n_jobs)].w;
        const int64_t n0 = ((i + 1) / n_jobs) * group, n1 = std::min(n_ids, n0 + group);
        for (int64_t k = n0; k < n1; ++k) next[n_next++] = nw.row(ids[static_cast<size_t>(k)]);
      }
      for (int64_t b = 0; b < batch; ++b) {
        float* y = job.y + b * job.y_stride;
        const uint8_t* nb = need == nullptr ? nullptr : need + b * need_stride;
        bool all = k1 - k0 == 4;
        for (int64_t k = k0; all && nb != nullptr && k < k1; ++k) all = nb[k] != 0;
        if (all) {
          const BlockQ4_0* rows[4];
          for (int r = 0; r < 4; ++r)
            rows[r] =
                reinterpret_cast<const BlockQ4_0*>(job.w->row(ids[static_cast<size_t>(k0 + r)]));
          // The first token's pass requests the next rows (the others find them cached).
          kernels.gather_dot4_q4_0(rows, x[static_cast<size_t>(b)].q8(), job.w->cols, y + k0, next,
                                   b == 0 ? n_next : 0);
          continue;
        }
        // One row at a time (other types, or rows some token skips): the first token's pass
        // requests the next rows, spread over this item's rows.
        for (int64_t k = k0; k < k1; ++k)
          y[k] = (nb == nullptr || nb[k] != 0)
                     ? dot_row_gathered(kernels, *job.w, ids[static_cast<size_t>(k)],
                                        x[static_cast<size_t>(b)],
                                        b == 0 && k - k0 < n_next ? next[k - k0] : nullptr)
                     : 0.0f;
      }
    }
  });
}

void axpy_row_slice(const CpuKernels& kernels, const MatrixView& wt, const int64_t* rows,
                    const float* c, int n_rows, float* out, int64_t begin, int64_t end,
                    const int64_t* next_rows, int n_next) {
  constexpr int kMax = kAxpyGroup;
  if (n_rows > kMax || n_next > kMax) fail("axpy_row_slice: at most {} rows per call", kMax);
  const uint64_t offset = row_bytes(wt.type, static_cast<uint64_t>(begin));
  const uint8_t* p[kMax];
  const void* next[kMax];
  for (int r = 0; r < n_rows; ++r) p[r] = wt.row(rows[r]) + offset;
  for (int r = 0; r < n_next; ++r) next[r] = wt.row(next_rows[r]) + offset;
  axpy_pointers(kernels, wt.type, p, c, n_rows, out + begin, end - begin, next, n_next);
}

void axpy_rows(const CpuKernels& kernels, const MatrixView& wt, std::span<const int32_t> ids,
               const float* c, int64_t c_stride, int64_t batch, float* out, int64_t out_stride,
               ThreadPool& pool, std::span<const int32_t> neurons) {
  switch (wt.type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
      break;
    default:
      fail("axpy over a {} matrix is not supported", dtype_name(wt.type));
  }
  const int64_t cols = wt.cols, n_ids = static_cast<int64_t>(ids.size());
  if (!neurons.empty() && neurons.size() != ids.size())
    fail("axpy_rows: {} neuron ids for {} rows", neurons.size(), ids.size());
  const std::span<const int32_t> keys = neurons.empty() ? ids : neurons;
  // Each token's active (row, coefficient) pairs, cut into items: runs of consecutive list
  // entries in the same bucket of kAxpyBucket neuron ids (with an ascending list, one item per
  // bucket). A thread sums an item's rows (whole rows, long sequential reads) into the item's
  // own partial vector; a token's partials are then added in item order. So a token's result
  // depends only on its active neurons and coefficients: not on the thread count, the rest of
  // the list (dense, gate-first, predicted, a batch's union) or its position in a neuron cache. No
  // two threads ever write the same memory.
  struct Item {
    int64_t token, bucket, first, count;
  };
  // Scratch of the calling thread, reused across calls. Named through references: inside the
  // lambdas below (run by pool threads) a thread_local name would mean the worker's own copy.
  thread_local std::vector<int64_t> rows_storage, token_items_storage, cumulative_storage;
  thread_local std::vector<float> coefs_storage, partials_storage;
  thread_local std::vector<Item> items_storage;
  std::vector<int64_t>& rows = rows_storage;
  std::vector<int64_t>& token_items = token_items_storage;  // [batch + 1]: first item per token
  std::vector<int64_t>& cumulative = cumulative_storage;    // rows in items [0, i]
  std::vector<float>& coefs = coefs_storage;
  std::vector<float>& partials = partials_storage;
  std::vector<Item>& items = items_storage;
  rows.clear(), coefs.clear(), items.clear(), cumulative.clear();
  token_items.assign(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    token_items[b] = static_cast<int64_t>(items.size());
    const float* cb = c + b * c_stride;
    for (int64_t k = 0; k < n_ids; ++k) {
      if (cb[k] == 0.0f) continue;  // an inactive neuron: its row is never read
      const int64_t bucket = keys[static_cast<size_t>(k)] / kAxpyBucket;
      if (items.empty() || items.back().token != b || items.back().bucket != bucket)
        items.push_back({b, bucket, static_cast<int64_t>(rows.size()), 0});
      rows.push_back(ids[static_cast<size_t>(k)]);
      coefs.push_back(cb[k]);
      ++items.back().count;
    }
  }
  token_items[batch] = static_cast<int64_t>(items.size());
  const int64_t n_items = static_cast<int64_t>(items.size());
  if (partials.size() < static_cast<size_t>(n_items * cols)) partials.resize(n_items * cols);
  for (const Item& it : items) cumulative.push_back(it.first + it.count);
  pool.parallel_for_weighted(cumulative, [&](int64_t i0, int64_t i1, int) {
    // This thread's items cover rows [first, last) in order: each group prefetches the next.
    const int64_t last =
        items[static_cast<size_t>(i1 - 1)].first + items[static_cast<size_t>(i1 - 1)].count;
    for (int64_t i = i0; i < i1; ++i) {
      const Item& it = items[static_cast<size_t>(i)];
      float* p = partials.data() + i * cols;
      std::fill(p, p + cols, 0.0f);
      for (int64_t g = 0; g < it.count; g += kAxpyGroup) {
        const int n = static_cast<int>(std::min<int64_t>(kAxpyGroup, it.count - g));
        const int64_t at = it.first + g + n;
        const int n_next = static_cast<int>(std::min<int64_t>(kAxpyGroup, last - at));
        axpy_row_slice(kernels, wt, rows.data() + it.first + g, coefs.data() + it.first + g, n, p,
                       0, cols, rows.data() + at, n_next);
      }
    }
  });
  // Sum the partials per token, in item order, over column slices (independent per element).
  constexpr int64_t kSlice = 256;
  const int64_t n_slices = (cols + kSlice - 1) / kSlice;
  pool.parallel_for(batch * n_slices, [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t b = j / n_slices, begin = (j % n_slices) * kSlice;
      const int64_t end = std::min(cols, begin + kSlice);
      float* y = out + b * out_stride;
      const int64_t first = token_items[b], last = token_items[b + 1];
      if (first == last) {
        std::fill(y + begin, y + end, 0.0f);
        continue;
      }
      std::copy(partials.data() + first * cols + begin, partials.data() + first * cols + end,
                y + begin);
      for (int64_t i = first + 1; i < last; ++i) {
        const float* p = partials.data() + i * cols;
        for (int64_t e = begin; e < end; ++e) y[e] += p[e];
      }
    }
  });
}

}  // namespace strata
