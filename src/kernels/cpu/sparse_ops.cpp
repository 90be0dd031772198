#include "kernels/cpu/sparse_ops.h"

#include <algorithm>

#include "core/error.h"
#include "tensor/dtype.h"

namespace strata {

void gather_matmat(const CpuKernels& kernels, std::span<const GatherJob> jobs,
                   std::span<const int32_t> ids, std::span<const PreparedInput> x,
                   ThreadPool& pool, const uint8_t* need, int64_t need_stride) {
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  const int64_t batch = static_cast<int64_t>(x.size());
  const int64_t n_jobs = static_cast<int64_t>(jobs.size());
  if (n_ids == 0) return;
  // One work item per (job, id): threads take contiguous runs of ids, so each reads a
  // compact part of the (sorted) neuron list.
  pool.parallel_for(n_jobs * n_ids, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const GatherJob& job = jobs[static_cast<size_t>(i / n_ids)];
      const int64_t k = i % n_ids;
      const int64_t row = ids[static_cast<size_t>(k)];
      for (int64_t b = 0; b < batch; ++b) {
        float* y = job.y + b * job.y_stride + k;
        *y = (need == nullptr || need[b * need_stride + k] != 0)
                 ? dot_row(kernels, *job.w, row, x[static_cast<size_t>(b)])
                 : 0.0f;
      }
    }
  });
}

void axpy_row_slice(const CpuKernels& kernels, const MatrixView& wt, int64_t row, float c,
                    float* out, int64_t begin, int64_t end) {
  const uint8_t* r = static_cast<const uint8_t*>(wt.row(row));
  const int64_t n = end - begin;
  switch (wt.type) {
    case DType::F32:
      kernels.axpy_f32(reinterpret_cast<const float*>(r) + begin, c, out + begin, n);
      break;
    case DType::F16:
      kernels.axpy_f16(reinterpret_cast<const uint16_t*>(r) + begin, c, out + begin, n);
      break;
    case DType::BF16:
      kernels.axpy_bf16(reinterpret_cast<const uint16_t*>(r) + begin, c, out + begin, n);
      break;
    case DType::Q8_0:
      kernels.axpy_q8_0(reinterpret_cast<const BlockQ8_0*>(r) + begin / kQK, c, out + begin, n);
      break;
    case DType::Q4_0:
      kernels.axpy_q4_0(reinterpret_cast<const BlockQ4_0*>(r) + begin / kQK, c, out + begin, n);
      break;
    default:
      fail("axpy over a {} matrix is not supported", dtype_name(wt.type));
  }
}

void axpy_rows(const CpuKernels& kernels, const MatrixView& wt, std::span<const int32_t> ids,
               const float* c, int64_t c_stride, int64_t batch, float* out, int64_t out_stride,
               ThreadPool& pool) {
  const int64_t cols = wt.cols, n_ids = static_cast<int64_t>(ids.size());
  // Column slices of 64 elements: a multiple of every block size and of the SIMD widths, so
  // an element is computed by the same instructions whichever slice holds it.
  constexpr int64_t kSlice = 64;
  const int64_t n_slices = (cols + kSlice - 1) / kSlice;
  pool.parallel_for(n_slices, [&](int64_t s0, int64_t s1, int) {
    const int64_t begin = s0 * kSlice, end = std::min(cols, s1 * kSlice);
    const uint64_t offset = row_bytes(wt.type, static_cast<uint64_t>(begin));
    const uint64_t prefetch = std::min<uint64_t>(row_bytes(wt.type, static_cast<uint64_t>(end - begin)), 256);
    for (int64_t b = 0; b < batch; ++b)
      std::fill(out + b * out_stride + begin, out + b * out_stride + end, 0.0f);
    for (int64_t k = 0; k < n_ids; ++k) {
      // The next neuron's row is elsewhere in memory: ask for its first lines now.
      if (k + 1 < n_ids) {
        const char* next =
            reinterpret_cast<const char*>(wt.row(ids[static_cast<size_t>(k + 1)])) + offset;
        for (uint64_t off = 0; off < prefetch; off += 64)
          __builtin_prefetch(next + off);
      }
      const int64_t row = ids[static_cast<size_t>(k)];
      for (int64_t b = 0; b < batch; ++b) {
        const float ck = c[b * c_stride + k];
        if (ck != 0.0f) axpy_row_slice(kernels, wt, row, ck, out + b * out_stride, begin, end);
      }
    }
  });
}

}  // namespace strata
