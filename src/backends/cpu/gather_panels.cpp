#include "backends/cpu/gather_panels.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/amx_matmat.h"
#include "core/error.h"
#include "tensor/interleaved_rows.h"

namespace strata {

bool through_panel(int64_t needing, int64_t batch, double crossover) {
  return batch >= kPanelMinBatch && needing > 0 &&
         static_cast<double>(needing) >= crossover * static_cast<double>(batch);
}

double panel_crossover(DType type, const BatchForms& forms) {
  // Measured on a 2-core Xeon (docs/PERFORMANCE.md, "Prompts on the sparse paths"): the best
  // of a sweep for AMX int8 (1B Q4_0) and AMX-BF16 (7B F16); the group kernels' gain is within
  // that machine's noise from 0.25 to 0.6.
  if (forms.amx_int8 && amx_reads(type)) return 0.12;
  if (forms.bf16 != nullptr && type == DType::F16) return 0.25;
  if (interleavable(type) || is_kquant(type) || is_float_type(type) || is_unit_type(type))
    return 0.4;
  return 2.0;
}

bool panel_reads(Layout layout) {
  return layout == Layout::Rows || layout == Layout::Interleaved16;
}

void split_gather(const uint8_t* need, int64_t need_stride, int64_t n_ids, int64_t batch,
                  double crossover, GatherSplit& out) {
  out.panel.clear();
  out.single.clear();
  if (batch < kPanelMinBatch) {  // decode: every entry token by token, nothing to count
    out.needing.clear();
    out.single.resize(static_cast<size_t>(n_ids));
    for (int64_t k = 0; k < n_ids; ++k)
      out.single[static_cast<size_t>(k)] = static_cast<int32_t>(k);
    return;
  }
  out.needing.assign(static_cast<size_t>(n_ids), need == nullptr ? static_cast<int32_t>(batch) : 0);
  if (need != nullptr)
    for (int64_t b = 0; b < batch; ++b) {
      const uint8_t* nb = need + b * need_stride;
      for (int64_t k = 0; k < n_ids; ++k) out.needing[static_cast<size_t>(k)] += nb[k] != 0;
    }
  for (int64_t k = 0; k < n_ids; ++k)
    (through_panel(out.needing[static_cast<size_t>(k)], batch, crossover) ? out.panel : out.single)
        .push_back(static_cast<int32_t>(k));
}

uint64_t gather_scratch_bytes(int64_t batch, int64_t n_ids, int64_t cols, int threads) {
  // Work items: at most one per id and job (two jobs: gate and up).
  const auto ids = static_cast<uint64_t>(n_ids);
  const uint64_t caller = ids * 3 * sizeof(int32_t) + 2 * (ids + 1) * sizeof(int64_t);
  const uint64_t panel = kPanelRows * row_bytes(DType::F32, cols) +
                         static_cast<uint64_t>(batch * kPanelRows) * sizeof(float);
  return caller + static_cast<uint64_t>(std::max(1, threads)) * panel;
}

void gather_panel(const CpuKernels& kernels, const MatrixView& w, std::span<const int32_t> ids,
                  std::span<const int32_t> positions, std::span<const PreparedInput> x,
                  const BatchForms& forms, const uint8_t* need, int64_t need_stride, float* y,
                  int64_t y_stride) {
  const int64_t n = static_cast<int64_t>(positions.size());
  const int64_t batch = static_cast<int64_t>(x.size());
  if (n > kPanelRows) fail("a panel holds at most {} rows, not {}", kPanelRows, n);
  if (!panel_reads(w.layout)) fail("no panel reads rows of this layout");
  // AMX reads the rows as they lie; the group kernels read groups of 16 interleaved rows.
  const bool interleave = !(forms.amx_int8 && amx_reads(w.type)) && interleavable(w.type);
  const uint64_t bytes = row_bytes(w.type, w.cols);
  thread_local std::vector<uint8_t> panel;
  thread_local std::vector<float> out;
  panel.resize(bytes * kPanelRows);
  out.resize(static_cast<size_t>(batch * kPanelRows));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t row = ids[static_cast<size_t>(positions[r])];
    uint8_t* to = panel.data() + r * bytes;
    if (w.layout == Layout::Interleaved16)  // a matrix interleaved at load (gate-first's up)
      extract_row16(w.type,
                    w.data + static_cast<uint64_t>(row / kInterleavedRows) *
                                 interleaved_group_bytes(w.type, w.cols),
                    w.cols, static_cast<int>(row % kInterleavedRows), to);
    else
      std::memcpy(to, w.row(row), bytes);
  }
  MatrixView v{w.type, panel.data(), w.cols, kPanelRows, bytes, Layout::Rows};
  int64_t rows = n;
  if (interleave) {
    std::memset(panel.data() + n * bytes, 0, (kPanelRows - n) * bytes);  // zero rows: zero sums
    interleave_rows16(w.type, panel.data(), kPanelRows, w.cols);
    v.layout = Layout::Interleaved16;
    rows = kPanelRows;
  }
  matmat_rows(kernels, v, 0, rows, x, forms, out.data(), kPanelRows);
  for (int64_t b = 0; b < batch; ++b) {
    const uint8_t* nb = need == nullptr ? nullptr : need + b * need_stride;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t k = positions[static_cast<size_t>(r)];
      y[b * y_stride + k] = nb == nullptr || nb[k] != 0 ? out[b * kPanelRows + r] : 0.0f;
    }
  }
}

}  // namespace strata
