// The column-group layouts of Q8_0 and Q4_K matrices (Layout::ColumnGroups): the copies
// input-sparse products (TEAL) read for quantized matrices, with their values and scales unchanged.
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
#include "tensor/kquants.h"
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

// Whether a matrix of `type` (Q8_0 or Q4_K), n_out outputs and n_in inputs has a column-group
// copy: whole chunks of outputs, whole blocks (Q4_K: super-blocks) of inputs.
inline bool column_groups_fit(DType type, int64_t n_out, int64_t n_in) {
  const int64_t block = type == DType::Q8_0 ? kColumnGroup : type == DType::Q4_K ? kQK_K : 0;
  return block > 0 && n_out > 0 && n_in > 0 && n_out % kColumnChunk == 0 && n_in % block == 0;
}

// Bytes of one group: n_out f16 scales, then 32 rows of n_out int8 values.
STRATA_HD inline uint64_t column_group_bytes(int64_t n_out) {
  return static_cast<uint64_t>(n_out) * (sizeof(uint16_t) + kColumnGroup);
}

// Q4_K copies keep the file's 4-bit values, 6-bit scales and mins and f16 super-block scales,
// regrouped: per super-block of 256 inputs, the n_out d then the n_out dmin (f16); then per
// sub-block of 32 inputs (a "group", kColumnGroup) the n_out scales and the n_out mins (u8), then
// for each of its 32 inputs a row of n_out 4-bit values. A row's 32 bytes per chunk of 64
// outputs hold positions 0..31 in their low nibbles and 32..63 in their high nibbles: unpacked,
// the two halves of a Q8_0 row's chunk.
inline constexpr int64_t kQ4KGroups = kQK_K / kColumnGroup;  // groups per super-block

STRATA_HD inline uint64_t q4_k_column_group_bytes(int64_t n_out) {
  return static_cast<uint64_t>(n_out) * (2 + kColumnGroup / 2);
}
STRATA_HD inline uint64_t q4_k_column_super_bytes(int64_t n_out) {
  return static_cast<uint64_t>(n_out) * 2 * sizeof(uint16_t) +
         kQ4KGroups * q4_k_column_group_bytes(n_out);
}

// The view of a copy at `data`: rows = inputs, cols = outputs; row_bytes is a group's (Q4_K: a
// super-block's) bytes per input, so bytes() is the copy's size (row() is meaningless: use the
// functions below).
inline MatrixView column_groups_view(DType type, const uint8_t* data, int64_t n_in, int64_t n_out) {
  const uint64_t per_input = type == DType::Q4_K ? q4_k_column_super_bytes(n_out) / kQK_K
                                                 : column_group_bytes(n_out) / kColumnGroup;
  MatrixView v{type, data, n_out, n_in, per_input};
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

// The scales a Q4_K group's products need, each in output order.
struct Q4KColumnScales {
  const uint16_t* d;     // the super-block's f16 scales of the scales
  const uint16_t* dmin;  // and of the mins
  const uint8_t* sc;     // the group's 6-bit scales
  const uint8_t* m;      // and mins
};

STRATA_HD inline Q4KColumnScales q4_k_column_scales(const uint8_t* data, int64_t n_out, int64_t g) {
  const uint8_t* super =
      data + static_cast<uint64_t>(g / kQ4KGroups) * q4_k_column_super_bytes(n_out);
  const uint8_t* group = super + static_cast<uint64_t>(n_out) * 2 * sizeof(uint16_t) +
                         static_cast<uint64_t>(g % kQ4KGroups) * q4_k_column_group_bytes(n_out);
  const auto* d = reinterpret_cast<const uint16_t*>(super);
  return {d, d + n_out, group, group + n_out};
}

// One group's share of a Q4_K input-sparse product: its kept rows and their quantized input
// values, its scales and mins, and the sum of its quantized values.
struct Q4KColumnTerms {
  const uint8_t* const* rows;
  const int8_t* xq;
  int n_rows;
  const uint8_t* sc;
  const uint8_t* m;
  int32_t xsum;
};

// Input j's 4-bit values (n_out / 2 bytes).
STRATA_HD inline const uint8_t* q4_k_column_row(const uint8_t* data, int64_t n_out, int64_t j) {
  return q4_k_column_scales(data, n_out, j / kColumnGroup).sc + 2 * static_cast<uint64_t>(n_out) +
         static_cast<uint64_t>(j % kColumnGroup) * static_cast<uint64_t>(n_out / 2);
}

// Output i's value in a Q4_K row.
STRATA_HD inline int q4_k_column_quant(const uint8_t* row, int64_t i) {
  const int64_t p = column_group_position(i), k = p % kColumnChunk;
  const uint8_t byte = row[(p - k) / 2 + k % 32];
  return k < 32 ? byte & 15 : byte >> 4;
}

// W[i][j] as the copy holds it (as the file's rows dequantize).
inline float column_group_weight(const MatrixView& v, int64_t i, int64_t j) {
  if (v.type == DType::Q4_K) {
    const Q4KColumnScales s = q4_k_column_scales(v.data, v.cols, j / kColumnGroup);
    return kquant_value<BlockQ4_K>(f16_to_f32(s.d[i]), f16_to_f32(s.dmin[i]), s.sc[i], s.m[i],
                                   q4_k_column_quant(q4_k_column_row(v.data, v.cols, j), i));
  }
  const int8_t q = column_group_row(v.data, v.cols, j)[column_group_position(i)];
  return f16_to_f32(column_group_scales(v.data, v.cols, j / kColumnGroup)[i]) *
         static_cast<float>(q);
}

}  // namespace strata
