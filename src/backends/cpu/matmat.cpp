// Batched products (prompts): every weight row read once for the whole batch, through the
// kernel family the CPU and the weight type give (AMX tiles, register tiles, group kernels).
#include <algorithm>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/token_lanes.h"
#include "core/error.h"
#include "tensor/interleaved_rows.h"

namespace strata {

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

BatchForms batch_forms(const CpuKernels& k, std::span<const PreparedInput> x,
                       std::span<const DType> types, bool packed_int8) {
  BatchForms f;
  const int64_t batch = static_cast<int64_t>(x.size());
  const auto reads = [&](auto&& pred) { return std::any_of(types.begin(), types.end(), pred); };
  f.amx_int8 = batch >= kAmxMinBatch && amx_available();
  if (f.amx_int8)
    for (const auto& in : x) f.q8.push_back(in.q8());
  if (f.amx_int8 && packed_int8) {
    thread_local AmxInt8Activations callers_tiles;  // the caller's, kept for its next batch
    callers_tiles.prepare(f.q8, x[0].size());
    f.int8 = &callers_tiles;
  }
  std::vector<const float*> xs;
  for (const auto& in : x) xs.push_back(in.f32());
  const bool f16 = reads([](DType t) { return t == DType::F16; });
  if (f16 && batch >= kAmxMinBatch && batch <= kAmxBf16MaxTokens && amx_bf16_available()) {
    // The caller's buffer, kept from one product to the next.
    thread_local AmxBf16Activations callers_split;
    callers_split.prepare(xs, x[0].size());
    f.bf16 = &callers_split;
  }
  const bool other_floats = reads([&](DType t) {
    return is_float_type(t) && (t != DType::F16 || f.bf16 == nullptr);
  });
  if (other_floats && uses_token_lanes(batch, k.token_lanes)) {
    thread_local TokenLaneActivations callers_lanes;
    callers_lanes.prepare(xs, x[0].size(), k.token_lanes);
    f.lanes = &callers_lanes;
  }
  return f;
}

void matmat_rows(const CpuKernels& k, const MatrixView& w, int64_t lo, int64_t hi,
                 std::span<const PreparedInput> x, const BatchForms& forms, float* y,
                 int64_t y_stride) {
  const int64_t batch = static_cast<int64_t>(x.size());
  const bool amx = forms.amx_int8 && amx_reads(w.type);
  if (w.layout == Layout::Interleaved16 &&
      (!amx || lo % kInterleavedRows != 0 || hi % kInterleavedRows != 0)) {
    // Each token through the group kernel while the group is in cache (up to kGroupTokens
    // tokens per pass, each block unpacked once).
    for (int64_t r = lo; r < hi;) {
      const int64_t next = std::min(hi, (r / kInterleavedRows + 1) * kInterleavedRows);
      if (r % kInterleavedRows == 0 && next - r == kInterleavedRows)
        group_tokens(k, w, r, x, y, y_stride);
      else
        for (int64_t b = 0; b < batch; ++b) matvec_rows(k, w, x[b], y + b * y_stride, r, next);
      r = next;
    }
  } else if (amx && forms.int8 != nullptr && w.layout == Layout::Rows) {
    amx_matmat_rows(w, lo, hi, *forms.int8, y, y_stride);
  } else if (amx) {
    // The tile kernel takes up to kAmxMaxTokens tokens per call.
    for (int64_t t0 = 0; t0 < batch; t0 += kAmxMaxTokens)
      amx_matmat_rows(w, lo, hi,
                      std::span<const Q8Activation>(forms.q8).subspan(
                          static_cast<size_t>(t0),
                          static_cast<size_t>(std::min(kAmxMaxTokens, batch - t0))),
                      y + t0 * y_stride, y_stride);
  } else if (forms.bf16 != nullptr && w.type == DType::F16) {
    amx_matmat_f16(w, lo, hi, *forms.bf16, y, y_stride);
  } else if (forms.lanes != nullptr && is_float_type(w.type)) {
    token_lane_rows(k, w, lo, hi, *forms.lanes, y, y_stride);
  } else if (batch > 1 && is_float_type(w.type)) {
    // Float weights: register tiles of rows x tokens.
    dot_rows_multi(k, w, lo, hi, x, y, y_stride);
  } else if (batch > 1 && is_kquant(w.type)) {
    // K-quants: each row's super-blocks unpacked once for every token.
    dot_kquant_rows(k, w, lo, hi, x, y, y_stride);
  } else if (batch > 1 && is_unit_type(w.type)) {
    dot_unit_rows(k, w, lo, hi, x, y, y_stride);
  } else {
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t b = 0; b < batch; ++b) y[b * y_stride + r] = dot_row(k, w, r, x[b]);
  }
}

void matmat_multi(const CpuKernels& k, std::span<const MatMatJob> jobs,
                  std::span<const PreparedInput> x, ThreadPool& pool) {
  const int64_t batch = static_cast<int64_t>(x.size());
  if (batch > kBatchKernelTokens) {
    // The batched kernels take kBatchKernelTokens at most: larger batches (a flash tier's
    // prompts) go in slices, each over the whole matrix.
    std::vector<MatMatJob> slice(jobs.begin(), jobs.end());
    for (int64_t t0 = 0; t0 < batch; t0 += kBatchKernelTokens) {
      for (size_t j = 0; j < jobs.size(); ++j) slice[j].y = jobs[j].y + t0 * jobs[j].y_stride;
      matmat_multi(k, slice,
                   x.subspan(static_cast<size_t>(t0),
                             static_cast<size_t>(std::min(kBatchKernelTokens, batch - t0))),
                   pool);
    }
    return;
  }
  int64_t total = 0;
  for (const auto& j : jobs) total += j.w->rows;
  constexpr int64_t kRowsPerTask = 16;
  const int64_t n_tasks = (total + kRowsPerTask - 1) / kRowsPerTask;
  std::vector<DType> types;
  for (const auto& j : jobs) types.push_back(j.w->type);
  const BatchForms forms = batch_forms(k, x, types);
  pool.parallel_for(n_tasks, [&](int64_t t0, int64_t t1, int) {
    const int64_t begin = t0 * kRowsPerTask;
    const int64_t end = std::min(total, t1 * kRowsPerTask);
    int64_t offset = 0;
    for (const auto& j : jobs) {
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + j.w->rows);
      if (lo < hi) matmat_rows(k, *j.w, lo - offset, hi - offset, x, forms, j.y, j.y_stride);
      offset += j.w->rows;
    }
  });
}

}  // namespace strata
