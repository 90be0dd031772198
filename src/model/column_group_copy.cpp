#include "model/column_group_copy.h"

#include <cstring>

#include "core/error.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tensor/kquants.h"

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
    if (m.data == nullptr || m.type != parts[0].type || m.layout != Layout::Rows ||
        m.cols != parts[0].cols)
      return false;
  return column_groups_fit(parts[0].type, stacked_outputs(parts), parts[0].cols);
}

uint64_t column_groups_copy_bytes(std::span<const MatrixView> parts) {
  const int64_t n_out = stacked_outputs(parts), n_in = parts[0].cols;
  if (parts[0].type == DType::Q4_K)
    return static_cast<uint64_t>(n_in / kQK_K) * q4_k_column_super_bytes(n_out);
  return static_cast<uint64_t>(n_in / kColumnGroup) * column_group_bytes(n_out);
}

namespace {

// Q4_K: each super-block's d and dmin, each sub-block's scales and mins, each value's nibble
// (the layout of tensor/column_groups.h, which reads it back: q4_k_column_scales, _row).
void build_q4_k_groups(std::span<const MatrixView> parts, int64_t n_out, int64_t n_in,
                       uint8_t* out) {
  using K = KQuant<BlockQ4_K>;
  const uint64_t n = static_cast<uint64_t>(n_out), row_bytes = n / 2;
  for (int64_t b = 0; b < n_in / kQK_K; ++b) {
    uint8_t* super = out + static_cast<uint64_t>(b) * q4_k_column_super_bytes(n_out);
    auto* d = reinterpret_cast<uint16_t*>(super);
    int64_t i = 0;  // the output in the stacked order
    for (const MatrixView& m : parts)
      for (int64_t r = 0; r < m.rows; ++r, ++i) {
        const BlockQ4_K& block = reinterpret_cast<const BlockQ4_K*>(m.row(r))[b];
        d[i] = block.d;
        d[n + static_cast<uint64_t>(i)] = block.dmin;
        const int64_t at = column_group_position(i), k = at % kColumnChunk;
        const uint64_t byte = static_cast<uint64_t>((at - k) / 2 + k % 32);
        const int shift = k < 32 ? 0 : 4;
        for (int s = 0; s < kQ4KGroups; ++s) {
          uint8_t* group = super + 2 * n * sizeof(uint16_t) + s * q4_k_column_group_bytes(n_out);
          group[i] = static_cast<uint8_t>(K::scale(block, 2 * s));  // its 16-value group 2s
          group[n + static_cast<uint64_t>(i)] = static_cast<uint8_t>(K::min(block, 2 * s));
          uint8_t* rows = group + 2 * n;
          for (int t = 0; t < kColumnGroup; ++t)
            rows[static_cast<uint64_t>(t) * row_bytes + byte] |=
                static_cast<uint8_t>(K::quant(block, kColumnGroup * s + t) << shift);
        }
      }
  }
}

}  // namespace

MatrixView build_column_groups(std::span<const MatrixView> parts, uint8_t* out) {
  if (!column_groups_apply(parts)) fail("column-group copy: the matrices do not fit the layout");
  const int64_t n_out = stacked_outputs(parts), n_in = parts[0].cols;
  if (parts[0].type == DType::Q4_K) {
    std::memset(out, 0, column_groups_copy_bytes(parts));  // nibbles are or-ed in
    build_q4_k_groups(parts, n_out, n_in, out);
    return column_groups_view(DType::Q4_K, out, n_in, n_out);
  }
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
  return column_groups_view(DType::Q8_0, out, n_in, n_out);
}

}  // namespace strata
