// The column-group layout of a Q8_0 matrix (Layout::ColumnGroups): the copy input-sparse
// products (TEAL) read for a quantized matrix, with its int8 values and scales unchanged.
//
// A row-major Q8_0 matrix W (n_out rows of n_in inputs) holds, per output i and block g of 32
// inputs, a scale d[i][g] and 32 int8 values. Its column-group copy stores per block g of inputs
// (a "group") the n_out scales d[.][g] (f16), then for each of the group's 32 inputs j the n_out
// values W[.][j] as one contiguous row: what a kept input reads is one long read, and its
// products with the input, quantized per block of 32 exactly as the dense product quantizes it,
// are the dense product's integer sums (only the float additions run in another order).
//
// Within each chunk of 64 outputs a row stores output i at position column_group_position(i):
// the kernels interleave four rows byte by byte (unpack 8 then 16 bits within 128-bit lanes),
// and with this order the int32 sums come out in output order (a 256-bit register holds outputs
// [16k + 8h, +8) after interleaving the h-th 32 bytes of a chunk, k = 0..3).
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "tensor/half.h"
#include "tensor/matrix.h"

namespace strata {

inline constexpr int64_t kColumnGroup = 32;  // inputs per group (a Q8_0 block)
inline constexpr int64_t kColumnChunk = 64;  // outputs per permuted chunk

// The stored position of output i within its chunk's 64 bytes (an involution: the position of
// a stored index is also its output). Outputs 16k + 4l + t are stored at 16l + 4k + t.
STRATA_HD inline int64_t column_group_position(int64_t i) {
  const int64_t c = i % kColumnChunk, base = i - c;
  const int64_t k = c / 16, l = (c % 16) / 4, t = c % 4;
  return base + 16 * l + 4 * k + t;
}

// Whether a Q8_0 matrix of n_out outputs and n_in inputs has a column-group copy.
inline bool column_groups_fit(int64_t n_out, int64_t n_in) {
  return n_out > 0 && n_in > 0 && n_out % kColumnChunk == 0 && n_in % kColumnGroup == 0;
}

// Bytes of one group: n_out f16 scales, then 32 rows of n_out int8 values.
STRATA_HD inline uint64_t column_group_bytes(int64_t n_out) {
  return static_cast<uint64_t>(n_out) * (sizeof(uint16_t) + kColumnGroup);
}

// The view of a copy at `data`: rows = inputs, cols = outputs; row_bytes is a group's bytes per
// input, so bytes() is the copy's size (row() is meaningless: use the functions below).
inline MatrixView column_groups_view(const uint8_t* data, int64_t n_in, int64_t n_out) {
  MatrixView v{DType::Q8_0, data, n_out, n_in, column_group_bytes(n_out) / kColumnGroup};
  v.layout = Layout::ColumnGroups;
  return v;
}

// Group g's scales (f16, output order).
STRATA_HD inline const uint16_t* column_group_scales(const uint8_t* data, int64_t n_out,
                                                     int64_t g) {
  return reinterpret_cast<const uint16_t*>(data +
                                           static_cast<uint64_t>(g) * column_group_bytes(n_out));
}

// Input j's values (n_out int8, permuted within chunks).
STRATA_HD inline const int8_t* column_group_row(const uint8_t* data, int64_t n_out, int64_t j) {
  const int64_t g = j / kColumnGroup, r = j % kColumnGroup;
  return reinterpret_cast<const int8_t*>(
      data + static_cast<uint64_t>(g) * column_group_bytes(n_out) +
      static_cast<uint64_t>(n_out) * sizeof(uint16_t) + static_cast<uint64_t>(r * n_out));
}

// W[i][j] as the copy holds it: scale times value.
inline float column_group_weight(const MatrixView& v, int64_t i, int64_t j) {
  const int8_t q = column_group_row(v.data, v.cols, j)[column_group_position(i)];
  return f16_to_f32(column_group_scales(v.data, v.cols, j / kColumnGroup)[i]) *
         static_cast<float>(q);
}

}  // namespace strata
