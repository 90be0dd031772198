// A 2-D weight matrix used in place (usually inside the mapped model file): `rows` rows of
// `cols` elements each, rows contiguous. GGUF's dims[0] is cols, dims[1] is rows.
#pragma once

#include <cstdint>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace strata {

// Rows: the file's layout. Interleaved16: Q4_0/Q8_0/Q4_K rows interleaved by groups of 16
// (tensor/interleaved_rows.h),
// done at load for matrices that are only multiplied whole (row() is then meaningless; the
// kernels in matvec.h handle both layouts). ColumnGroups: a quantized matrix's copy for
// input-sparse products, by groups of inputs (tensor/column_groups.h; row() meaningless).
// ColumnGroupSlots: such a copy split in two, as the flash tier keeps a column-bundled model's
// quantized FFN: row r (a cache slot, row_bytes apart) holds one input's row of the copy, and
// `scales` the copy's scales (its scale plane); an axpy names each row's input.
enum class Layout { Rows, Interleaved16, ColumnGroups, ColumnGroupSlots };

struct MatrixView {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t cols = 0;
  int64_t rows = 0;
  uint64_t row_bytes = 0;
  Layout layout = Layout::Rows;
  Device device = Device::Host;  // where `data` lives
  const uint8_t* scales = nullptr;  // Layout::ColumnGroupSlots: the copy's scale plane

  const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
  uint64_t bytes() const { return row_bytes * static_cast<uint64_t>(rows); }
};

// Rows [first, first + count) of m as a matrix of their own (a fused q/k/v's parts, an
// expert of a stacked tensor).
inline MatrixView row_view(const MatrixView& m, int64_t first, int64_t count) {
  MatrixView v = m;
  v.data = m.row(first);
  v.rows = count;
  return v;
}

}  // namespace strata
