#include "backends/cpu/matvec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "core/error.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"

namespace strata {

void PreparedInput::prepare(const CpuKernels& kernels, const float* x, int64_t n, bool need_q8,
                            bool need_q8k) {
  x_ = x;
  n_ = n;
  if (need_q8k) {
    if (n % kQK_K != 0) fail("vector of {} elements cannot be quantized to Q8_K super-blocks", n);
    q8k_.resize(static_cast<size_t>(n / kQK_K));
    quantize_row_q8_K(x, q8k_.data(), n);
  }
  if (need_q8) {
    if (n % kQK != 0) fail("vector of {} elements cannot be quantized to Q8_0 blocks", n);
    const int64_t nb = n / kQK;
    q8_.resize(nb);
    q8_scale_.resize(nb);
    q8_scaled_sum_.resize(nb);
    q4_lane_offsets_.resize(nb * 8);
    q8_minus_8_sum_.resize(nb);
    q8_lane_scale_.resize(nb * 8);
    q8_1_sum_.resize(nb);
    q8_qs_.resize(n);
    kernels.quantize_q8_0(x, q8_.data(), n);
    for (int64_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < kQK; ++j) sum += q8_[b].qs[j];
      q8_scale_[b] = f16_to_f32(q8_[b].d);
      q8_scaled_sum_[b] = q8_scale_[b] * static_cast<float>(sum);
      q8_minus_8_sum_[b] = -8 * sum;
      float amax = 0.0f;
      for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[b * kQK + j]));
      q8_1_sum_[b] = f16_to_f32(f32_to_f16(amax / 127.0f * static_cast<float>(sum)));
      for (int l = 0; l < 8; ++l) {
        q4_lane_offsets_[b * 8 + l] = q8_scaled_sum_[b] * (l < 4 ? 1.0f : 16.0f);
        q8_lane_scale_[b * 8 + l] = q8_scale_[b];
      }
      std::copy(q8_[b].qs, q8_[b].qs + kQK, q8_qs_.begin() + b * kQK);
    }
    q8_biased_.resize(n);
    for (int64_t i = 0; i < n; ++i)
      q8_biased_[i] = static_cast<uint8_t>(static_cast<uint8_t>(q8_qs_[i]) ^ 0x80u);
    q8_view_ = {q8_.data(),
                q8_scale_.data(),
                q8_scaled_sum_.data(),
                q8_minus_8_sum_.data(),
                q4_lane_offsets_.data(),
                q8_qs_.data(),
                q8_lane_scale_.data(),
                q8_1_sum_.data(),
                q8_biased_.data()};
  }
}

namespace {

// Gathered rows (next: the caller's next row, may be null) through the gather_dot_* kernels.
template <bool kGathered>
float dot_one_row(const CpuKernels& k, const MatrixView& w, int64_t row, const PreparedInput& x,
                  const void* next) {
  if (w.layout == Layout::Interleaved16) {
    std::vector<uint8_t> plain(row_bytes(w.type, w.cols));
    const int64_t g = row / kInterleavedRows;
    extract_row16(w.type,
                  w.data + static_cast<uint64_t>(g) * interleaved_group_bytes(w.type, w.cols),
                  w.cols, static_cast<int>(row % kInterleavedRows), plain.data());
    if (w.type == DType::Q8_0)
      return scalar_kernels().dot_q8_0(reinterpret_cast<const BlockQ8_0*>(plain.data()), x.q8(),
                                       w.cols);
    if (w.type == DType::Q4_K)
      return scalar_kernels().dot_kq[kquant_slot(DType::Q4_K)](plain.data(), x.q8k(), w.cols);
    if (is_unit_type(w.type))
      return scalar_kernels().dot_unit[unit_slot(w.type)](plain.data(), {&x.q8(), x.q8k()}, w.cols);
    return scalar_kernels().dot_q4_0(reinterpret_cast<const BlockQ4_0*>(plain.data()), x.q8(),
                                     w.cols);
  }
  const uint8_t* p = w.row(row);
  switch (w.type) {
    case DType::F32: {
      const auto* r = reinterpret_cast<const float*>(p);
      return kGathered ? k.gather_dot_f32(r, x.f32(), w.cols, next) : k.dot_f32(r, x.f32(), w.cols);
    }
    case DType::F16: {
      const auto* r = reinterpret_cast<const uint16_t*>(p);
      return kGathered ? k.gather_dot_f16(r, x.f32(), w.cols, next) : k.dot_f16(r, x.f32(), w.cols);
    }
    case DType::BF16: {
      const auto* r = reinterpret_cast<const uint16_t*>(p);
      return kGathered ? k.gather_dot_bf16(r, x.f32(), w.cols, next)
                       : k.dot_bf16(r, x.f32(), w.cols);
    }
    case DType::Q8_0: {
      const auto* r = reinterpret_cast<const BlockQ8_0*>(p);
      return kGathered ? k.gather_dot_q8_0(r, x.q8(), w.cols, next) : k.dot_q8_0(r, x.q8(), w.cols);
    }
    case DType::Q4_0: {
      const auto* r = reinterpret_cast<const BlockQ4_0*>(p);
      return kGathered ? k.gather_dot_q4_0(r, x.q8(), w.cols, next) : k.dot_q4_0(r, x.q8(), w.cols);
    }
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      const int slot = kquant_slot(w.type);
      return kGathered ? k.gather_dot_kq[slot](p, x.q8k(), w.cols, next)
                       : k.dot_kq[slot](p, x.q8k(), w.cols);
    }
    default: {
      const int slot = unit_slot(w.type);
      if (slot < 0) fail("no kernel for {} weights", dtype_name(w.type));
      const UnitInput in{&x.q8(), x.q8k()};
      return kGathered ? k.gather_dot_unit[slot](p, in, w.cols, next)
                       : k.dot_unit[slot](p, in, w.cols);
    }
  }
}

}  // namespace

float dot_row(const CpuKernels& k, const MatrixView& w, int64_t row, const PreparedInput& x) {
  return dot_one_row<false>(k, w, row, x, nullptr);
}

float dot_row_gathered(const CpuKernels& k, const MatrixView& w, int64_t row,
                       const PreparedInput& x, const void* next) {
  return dot_one_row<true>(k, w, row, x, next);
}

void matvec_rows(const CpuKernels& k, const MatrixView& w, const PreparedInput& x, float* y,
                 int64_t begin, int64_t end) {
  if (w.layout == Layout::Interleaved16) {
    const uint64_t group_bytes = interleaved_group_bytes(w.type, w.cols);
    const auto kernel = w.type == DType::Q8_0 ? k.matvec_q8_0x16 : k.matvec_q4_0x16;
    // A unit type's kernel and block count, looked up once rather than per group.
    const int slot = unit_slot(w.type);
    const auto unit_kernel = slot >= 0 ? k.matvec_unit_x16[slot] : nullptr;
    const int64_t unit_blocks = slot >= 0 ? w.cols / dtype_info(w.type).block_size : 0;
    int64_t r = begin;
    for (; r < end && r % kInterleavedRows != 0; ++r) y[r] = dot_row(k, w, r, x);
    for (; r + kInterleavedRows <= end; r += kInterleavedRows) {
      const uint8_t* group = w.data + static_cast<uint64_t>(r / kInterleavedRows) * group_bytes;
      if (w.type == DType::Q4_K)
        k.matvec_q4_Kx16(group, x.q8k(), w.cols / kQK_K, y + r);
      else if (unit_kernel != nullptr)
        unit_kernel(group, {&x.q8(), x.q8k()}, unit_blocks, y + r);
      else
        kernel(group, x.q8(), w.cols / kQK, y + r);
    }
    for (; r < end; ++r) y[r] = dot_row(k, w, r, x);
    return;
  }
  for (int64_t r = begin; r < end; ++r) y[r] = dot_row(k, w, r, x);
}

void matvec_multi(const CpuKernels& k, std::initializer_list<MatVecJob> jobs,
                  const PreparedInput& x, ThreadPool& pool) {
  int64_t total = 0;
  for (const auto& j : jobs) total += j.w->rows;
  // Tasks are groups of 16 rows so threads never share a cache line of y.
  constexpr int64_t kRowsPerTask = 16;
  const int64_t n_tasks = (total + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(n_tasks, [&](int64_t t0, int64_t t1, int) {
    int64_t begin = t0 * kRowsPerTask;
    const int64_t end = std::min(total, t1 * kRowsPerTask);
    int64_t offset = 0;
    for (const auto& j : jobs) {
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + j.w->rows);
      if (lo < hi) matvec_rows(k, *j.w, x, j.y, lo - offset, hi - offset);
      offset += j.w->rows;
    }
  });
}

void matvec(const CpuKernels& k, const MatrixView& w, const float* x, float* y, ThreadPool& pool) {
  PreparedInput in;
  in.prepare_for(k, x, w.cols, w.type);
  matvec_multi(k, {{&w, y}}, in, pool);
}

}  // namespace strata
