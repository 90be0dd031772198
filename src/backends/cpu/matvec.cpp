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
    q8_view_ = {q8_.data(),
                q8_scale_.data(),
                q8_scaled_sum_.data(),
                q8_minus_8_sum_.data(),
                q4_lane_offsets_.data(),
                q8_qs_.data(),
                q8_lane_scale_.data(),
                q8_1_sum_.data()};
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

namespace {

// y[b * stride + r] for rows [begin, end) of a float-type matrix and every input b, through
// the tile kernels in panels of rows (the panel's results transposed into y).
void dot_rows_multi(const CpuKernels& k, const MatrixView& w, int64_t begin, int64_t end,
                    std::span<const PreparedInput> x, float* y, int64_t stride) {
  constexpr int kMax = 64, kPanel = 16;
  const int n = static_cast<int>(x.size());
  if (n > kMax) fail("at most {} inputs per batched product", kMax);
  const float* xs[kMax];
  float out[kPanel * kMax];
  for (int b = 0; b < n; ++b) xs[b] = x[static_cast<size_t>(b)].f32();
  for (int64_t r0 = begin; r0 < end; r0 += kPanel) {
    const int rows = static_cast<int>(std::min<int64_t>(kPanel, end - r0));
    const uint8_t* p = w.row(r0);
    const int64_t elems = w.type == DType::F32 ? 4 : 2;
    const int64_t row_stride = static_cast<int64_t>(w.row_bytes) / elems;
    switch (w.type) {
      case DType::F32:
        k.dot_f32_tile(reinterpret_cast<const float*>(p), row_stride, rows, xs, n, w.cols, out);
        break;
      case DType::F16:
        k.dot_f16_tile(reinterpret_cast<const uint16_t*>(p), row_stride, rows, xs, n, w.cols, out);
        break;
      case DType::BF16:
        k.dot_bf16_tile(reinterpret_cast<const uint16_t*>(p), row_stride, rows, xs, n, w.cols, out);
        break;
      default:
        fail("no batched kernel for {} weights", dtype_name(w.type));
    }
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < n; ++b) y[b * stride + r0 + r] = out[r * n + b];
  }
}

// y[b * stride + r] for rows [begin, end) of a K-quant matrix and every input b.
void dot_kquant_rows(const CpuKernels& k, const MatrixView& w, int64_t begin, int64_t end,
                     std::span<const PreparedInput> x, float* y, int64_t stride) {
  constexpr int kMax = 64;
  const int n = static_cast<int>(x.size());
  if (n > kMax) fail("at most {} inputs per batched product", kMax);
  const BlockQ8_K* xs[kMax];
  float out[kMax];
  for (int b = 0; b < n; ++b) xs[b] = x[static_cast<size_t>(b)].q8k();
  if (w.type == DType::Q6_K && k.matmat_q6_K_rows16 != nullptr) {  // blocks of 16 rows
    float* out16[kMax];
    for (; begin + 16 <= end; begin += 16) {
      for (int b = 0; b < n; ++b) out16[b] = y + b * stride + begin;
      k.matmat_q6_K_rows16(w.row(begin), w.row_bytes, xs, n, w.cols / kQK_K, out16);
    }
  }
  const auto kernel = k.dot_kq_multi[kquant_slot(w.type)];
  for (int64_t r = begin; r < end; ++r) {
    kernel(w.row(r), xs, n, w.cols, out);
    for (int b = 0; b < n; ++b) y[b * stride + r] = out[b];
  }
}

// y[b * stride + r] for rows [begin, end) of a unit-type matrix and every input b: each row's
// units decoded once for all of them.
void dot_unit_rows(const CpuKernels& k, const MatrixView& w, int64_t begin, int64_t end,
                   std::span<const PreparedInput> x, float* y, int64_t stride) {
  constexpr int kMax = 64;
  const int n = static_cast<int>(x.size());
  if (n > kMax) fail("at most {} inputs per batched product", kMax);
  UnitInput xs[kMax];
  float out[kMax];
  for (int b = 0; b < n; ++b)
    xs[b] = {&x[static_cast<size_t>(b)].q8(), x[static_cast<size_t>(b)].q8k()};
  const auto kernel = k.dot_unit_multi[unit_slot(w.type)];
  for (int64_t r = begin; r < end; ++r) {
    kernel(w.row(r), xs, n, w.cols, out);
    for (int b = 0; b < n; ++b) y[b * stride + r] = out[b];
  }
}

// Rows r .. r + 15 (one interleaved Q4_0/Q8_0/Q4_K or unit-type group) for every input,
// kGroupTokens at a time.
void group_tokens(const CpuKernels& k, const MatrixView& w, int64_t r,
                  std::span<const PreparedInput> x, float* y, int64_t y_stride) {
  const uint8_t* group = w.data + static_cast<uint64_t>(r / kInterleavedRows) *
                                      interleaved_group_bytes(w.type, w.cols);
  const int64_t batch = static_cast<int64_t>(x.size());
  const int slot = unit_slot(w.type);
  for (int64_t t0 = 0; t0 < batch; t0 += kGroupTokens) {
    const int n = static_cast<int>(std::min<int64_t>(kGroupTokens, batch - t0));
    float* out[kGroupTokens];
    for (int t = 0; t < n; ++t) out[t] = y + (t0 + t) * y_stride + r;
    const PreparedInput* in = x.data() + t0;
    if (w.type == DType::Q4_K) {
      const BlockQ8_K* xs[kGroupTokens];
      for (int t = 0; t < n; ++t) xs[t] = in[t].q8k();
      k.matmat_q4_Kx16(group, xs, n, w.cols / kQK_K, out);
    } else if (slot >= 0) {
      UnitInput units[kGroupTokens];
      for (int t = 0; t < n; ++t) units[t] = {&in[t].q8(), in[t].q8k()};
      k.matmat_unit_x16[slot](group, units, n, w.cols / dtype_info(w.type).block_size, out);
    } else {
      Q8Activation xs[kGroupTokens];
      for (int t = 0; t < n; ++t) xs[t] = in[t].q8();
      (w.type == DType::Q8_0 ? k.matmat_q8_0x16 : k.matmat_q4_0x16)(group, xs, n, w.cols / kQK,
                                                                    out);
    }
  }
}

}  // namespace

void matmat_multi(const CpuKernels& k, std::span<const MatMatJob> jobs,
                  std::span<const PreparedInput> x, ThreadPool& pool) {
  int64_t total = 0;
  for (const auto& j : jobs) total += j.w->rows;
  constexpr int64_t kRowsPerTask = 16;
  const int64_t n_tasks = (total + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t batch = static_cast<int64_t>(x.size());
  // Quantized weights and a batch of several tokens: AMX tiles where the CPU has them.
  const bool amx = batch >= kAmxMinBatch && amx_available();
  std::vector<Q8Activation> q8;
  if (amx)
    for (const auto& in : x) q8.push_back(in.q8());
  // F16 weights: AMX-BF16 tiles where the CPU has them, the activations split once for all rows.
  const bool amx_f16 =
      batch >= kAmxMinBatch && batch <= kAmxBf16MaxTokens && amx_bf16_available() &&
      std::any_of(jobs.begin(), jobs.end(), [](const MatMatJob& j) { return j.w->type == DType::F16; });
  // The caller's buffer, kept from one product to the next. (A lambda names thread_local
  // variables without capturing them: the workers reach it through this reference.)
  thread_local AmxBf16Activations callers_split;
  AmxBf16Activations& split = callers_split;
  if (amx_f16) {
    std::vector<const float*> xs;
    for (const auto& in : x) xs.push_back(in.f32());
    split.prepare(xs, x[0].size());
  }
  pool.parallel_for(n_tasks, [&](int64_t t0, int64_t t1, int) {
    const int64_t begin = t0 * kRowsPerTask;
    const int64_t end = std::min(total, t1 * kRowsPerTask);
    int64_t offset = 0;
    for (const auto& j : jobs) {
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + j.w->rows);
      if (lo < hi && j.w->layout == Layout::Interleaved16 &&
          (!amx || !amx_reads(j.w->type) || (lo - offset) % kInterleavedRows != 0 ||
           (hi - offset) % kInterleavedRows != 0)) {
        // Each token through the group kernel while the group is in cache (up to kGroupTokens
        // tokens per pass, each block unpacked once).
        for (int64_t r = lo - offset; r < hi - offset;) {
          const int64_t next = std::min(hi - offset, (r / kInterleavedRows + 1) * kInterleavedRows);
          if (r % kInterleavedRows == 0 && next - r == kInterleavedRows)
            group_tokens(k, *j.w, r, x, j.y, j.y_stride);
          else
            for (int64_t b = 0; b < batch; ++b)
              matvec_rows(k, *j.w, x[b], j.y + b * j.y_stride, r, next);
          r = next;
        }
      } else if (lo < hi && amx && amx_reads(j.w->type)) {
        // The tile kernel takes up to kAmxMaxTokens tokens per call.
        for (int64_t t0 = 0; t0 < batch; t0 += kAmxMaxTokens)
          amx_matmat_rows(*j.w, lo - offset, hi - offset,
                          std::span<const Q8Activation>(q8).subspan(
                              static_cast<size_t>(t0),
                              static_cast<size_t>(std::min(kAmxMaxTokens, batch - t0))),
                          j.y + t0 * j.y_stride, j.y_stride);
      } else if (lo < hi && amx_f16 && j.w->type == DType::F16) {
        amx_matmat_f16(*j.w, lo - offset, hi - offset, split, j.y, j.y_stride);
      } else if (lo < hi && batch > 1 && is_float_type(j.w->type)) {
        // Float weights: register tiles of rows x tokens.
        dot_rows_multi(k, *j.w, lo - offset, hi - offset, x, j.y, j.y_stride);
      } else if (lo < hi && batch > 1 && is_kquant(j.w->type)) {
        // K-quants: each row's super-blocks unpacked once for every token.
        dot_kquant_rows(k, *j.w, lo - offset, hi - offset, x, j.y, j.y_stride);
      } else if (lo < hi && batch > 1 && is_unit_type(j.w->type)) {
        dot_unit_rows(k, *j.w, lo - offset, hi - offset, x, j.y, j.y_stride);
      } else {
        for (int64_t r = lo; r < hi; ++r)
          for (int64_t b = 0; b < batch; ++b)
            j.y[b * j.y_stride + (r - offset)] = dot_row(k, *j.w, r - offset, x[b]);
      }
      offset += j.w->rows;
    }
  });
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
