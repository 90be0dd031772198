#include "model/column_group_copy.h"

#include "core/error.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"

namespace strata {

namespace {

int64_t stacked_outputs(std::span<const MatrixView> parts) {
  int64_t n = 0;
  for (const MatrixView& m : parts) n += m.rows;
  return n;
}

}  // namespace

bool column_groups_apply(std::span<const MatrixView> parts) {
  if (parts.empty()) return false;
  for (const MatrixView& m : parts)
    if (m.data == nullptr || m.type != DType::Q8_0 || m.layout != Layout::Rows ||
        m.cols != parts[0].cols)
      return false;
  return column_groups_fit(stacked_outputs(parts), parts[0].cols);
}

uint64_t column_groups_copy_bytes(std::span<const MatrixView> parts) {
  const int64_t groups = parts[0].cols / kColumnGroup;
  return static_cast<uint64_t>(groups) * column_group_bytes(stacked_outputs(parts));
}

MatrixView build_column_groups(std::span<const MatrixView> parts, uint8_t* out) {
  if (!column_groups_apply(parts)) fail("column-group copy: the matrices do not fit the layout");
  const int64_t n_out = stacked_outputs(parts), n_in = parts[0].cols;
  for (int64_t g = 0; g < n_in / kColumnGroup; ++g) {
    uint8_t* group = out + static_cast<uint64_t>(g) * column_group_bytes(n_out);
    auto* scales = reinterpret_cast<uint16_t*>(group);
    int8_t* values = reinterpret_cast<int8_t*>(group + n_out * sizeof(uint16_t));
    int64_t i = 0;  // the output in the stacked order
    for (const MatrixView& m : parts)
      for (int64_t r = 0; r < m.rows; ++r, ++i) {
        const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(m.row(r))[g];
        scales[i] = block.d;
        const int64_t at = column_group_position(i);
        for (int64_t t = 0; t < kColumnGroup; ++t) values[t * n_out + at] = block.qs[t];
      }
  }
  return column_groups_view(out, n_in, n_out);
}

}  // namespace strata
