// The column-group layouts of Q8_0, Q4_0 and K-quant (Q2_K..Q6_K) matrices (Layout::ColumnGroups):
// the copies input-sparse products (TEAL) read for quantized matrices, with their values and scales
// unchanged.
//
// A row-major Q8_0 matrix W (n_out rows of n_in inputs) holds, per output i and block g of 32
// inputs, a scale d[i][g] and 32 int8 values. Its column-group copy stores per block g of inputs
// (a "group") the n_out scales d[.][g] (f16), then for each of the group's 32 inputs j the n_out
// values W[.][j] as one contiguous row: what a kept input reads is one long read, and its
// products with the input, quantized per block of 32 exactly as the dense product quantizes it,
// are the dense product's integer sums (only the float additions run in another order). A Q4_0
// copy is the same with rows of n_out / 2 bytes holding the file's 4-bit quants q (the weight is
// d * (q - 8)), packed as the K-quants' rows below: per chunk of 64 outputs 32 bytes whose low
// nibbles hold positions 0..31 and high nibbles 32..63.
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

// The types with column-group copies and kernels: every quantized type strata computes (float
// matrices are transposed instead; a matrix that fits no copy keeps its rows).
STRATA_HD constexpr bool has_column_groups(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q2_K || type == DType::Q3_K ||
         type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
}

// The types whose copies are groups of 32 inputs with one scale each (the rest: K-quant
// super-blocks).
STRATA_HD constexpr bool has_block_column_groups(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0;
}

// Whether a matrix of `type`, n_out outputs and n_in inputs has a column-group copy: whole chunks
// of outputs, whole blocks (K-quants: super-blocks) of inputs.
inline bool column_groups_fit(DType type, int64_t n_out, int64_t n_in) {
  const int64_t block = !has_column_groups(type)        ? 0
                        : has_block_column_groups(type) ? kColumnGroup
                                                        : kQK_K;
  // Q6_K's and Q3_K's copies (210 and 114 bytes per 256 weights) have whole bytes per input
  // only with outputs by 128.
  const int64_t chunk =
      type == DType::Q6_K || type == DType::Q3_K ? 2 * kColumnChunk : kColumnChunk;
  return block > 0 && n_out > 0 && n_in > 0 && n_out % chunk == 0 && n_in % block == 0;
}

// A Q8_0 or Q4_0 copy's row: n_out int8 values, or n_out / 2 bytes of 4-bit quants.
STRATA_HD inline uint64_t column_group_row_bytes(DType type, int64_t n_out) {
  return static_cast<uint64_t>(type == DType::Q4_0 ? n_out / 2 : n_out);
}

// Bytes of one group: n_out f16 scales, then 32 rows.
STRATA_HD inline uint64_t column_group_bytes(DType type, int64_t n_out) {
  return static_cast<uint64_t>(n_out) * sizeof(uint16_t) +
         kColumnGroup * column_group_row_bytes(type, n_out);
}

// K-quant copies (Q2_K..Q6_K) keep the file's values, sub-block scales (and mins) and f16
// super-block scales, regrouped: per super-block of 256 inputs the n_out d (then, Q2_K, Q4_K and
// Q5_K, the n_out dmin); then per group of inputs (a sub-block: Q4_K and Q5_K 32, Q2_K, Q3_K and
// Q6_K 16) the n_out scales (u8 with mins, Q3_K and Q6_K int8; then the n_out mins where there
// are), then for each of its inputs a row of n_out values. A row's bytes per chunk of 64
// outputs: Q4_K, Q5_K and Q6_K 32 whose low nibbles hold positions 0..31 and high nibbles 32..63
// (unpacked: the two halves of a Q8_0 row's chunk); Q5_K then 8 more whose bit h of byte k is the
// fifth bit of position 8h + k; Q6_K 16 more whose bits 2h..2h+1 of byte k hold the top two bits
// of position 16h + k. Q2_K and Q3_K 16 whose bits 2h..2h+1 of byte k hold the low two bits of
// position 16h + k (Q6_K's top bits' packing); Q3_K then 8 more whose bit h of byte k is the
// third bit of position 8h + k (Q5_K's fifth bits' packing).
struct KColumnLayout {
  int64_t group;        // inputs per group
  int64_t chunk_bytes;  // a row's bytes per 64 outputs
  bool has_min;
  STRATA_HD int64_t groups() const { return kQK_K / group; }
  STRATA_HD uint64_t row_bytes(int64_t n_out) const {
    return static_cast<uint64_t>(n_out / kColumnChunk * chunk_bytes);
  }
  // A group's scales (and mins) and rows.
  STRATA_HD uint64_t group_bytes(int64_t n_out) const {
    return static_cast<uint64_t>(n_out) * (has_min ? 2 : 1) + group * row_bytes(n_out);
  }
  STRATA_HD uint64_t super_bytes(int64_t n_out) const {
    return static_cast<uint64_t>(n_out) * sizeof(uint16_t) * (has_min ? 2 : 1) +
           groups() * group_bytes(n_out);
  }
};

STRATA_HD inline KColumnLayout k_column_layout(DType type) {
  return type == DType::Q6_K   ? KColumnLayout{16, 48, false}
         : type == DType::Q5_K ? KColumnLayout{32, 40, true}
         : type == DType::Q3_K ? KColumnLayout{16, 24, false}
         : type == DType::Q2_K ? KColumnLayout{16, 16, true}
                               : KColumnLayout{32, 32, true};
}

// The view of a copy at `data`: rows = inputs, cols = outputs; row_bytes is a group's (K-quants:
// a super-block's) bytes per input, so bytes() is the copy's size (row() is meaningless: use the
// functions below).
inline MatrixView column_groups_view(DType type, const uint8_t* data, int64_t n_in, int64_t n_out) {
  const uint64_t per_input = has_block_column_groups(type)
                                 ? column_group_bytes(type, n_out) / kColumnGroup
                                 : k_column_layout(type).super_bytes(n_out) / kQK_K;
  MatrixView v{type, data, n_out, n_in, per_input};
  v.layout = Layout::ColumnGroups;
  return v;
}

// Group g's scales (f16, output order) of a Q8_0 or Q4_0 copy.
STRATA_HD inline const uint16_t* column_group_scales(DType type, const uint8_t* data, int64_t n_out,
                                                     int64_t g) {
  return reinterpret_cast<const uint16_t*>(data + static_cast<uint64_t>(g) *
                                                      column_group_bytes(type, n_out));
}

// Input j's row of a Q8_0 or Q4_0 copy (permuted within chunks).
STRATA_HD inline const uint8_t* column_group_row(DType type, const uint8_t* data, int64_t n_out,
                                                 int64_t j) {
  const int64_t g = j / kColumnGroup, r = j % kColumnGroup;
  return data + static_cast<uint64_t>(g) * column_group_bytes(type, n_out) +
         static_cast<uint64_t>(n_out) * sizeof(uint16_t) +
         static_cast<uint64_t>(r) * column_group_row_bytes(type, n_out);
}

// Output i's quant in a Q8_0 row (int8) or a Q4_0 row (0..15, the weight's q - 8 times d).
STRATA_HD inline int column_group_quant(DType type, const uint8_t* row, int64_t i) {
  const int64_t p = column_group_position(i);
  if (type == DType::Q8_0) return static_cast<int8_t>(row[p]);
  const int64_t k = p % kColumnChunk;
  const uint8_t byte = row[(p - k) / 2 + k % 32];
  return k < 32 ? byte & 15 : byte >> 4;
}

// The scales a K-quant group's products need, each in output order.
struct KColumnScales {
  const uint16_t* d;     // the super-block's f16 scales of the scales
  const uint16_t* dmin;  // and of the mins (null for Q6_K)
  const uint8_t* sc;     // the group's scales (Q6_K: int8)
  const uint8_t* m;      // and mins (null for Q6_K)
};

// The scales of group g in a copy laid out as `k` says (a scale plane: rows of 0 bytes).
STRATA_HD inline KColumnScales k_column_scales_in(const KColumnLayout& k, const uint8_t* data,
                                                  int64_t n_out, int64_t g) {
  const uint8_t* super = data + static_cast<uint64_t>(g / k.groups()) * k.super_bytes(n_out);
  const uint64_t n = static_cast<uint64_t>(n_out);
  const uint8_t* group = super + n * sizeof(uint16_t) * (k.has_min ? 2 : 1) +
                         static_cast<uint64_t>(g % k.groups()) * k.group_bytes(n_out);
  const auto* d = reinterpret_cast<const uint16_t*>(super);
  if (!k.has_min) return {d, nullptr, group, nullptr};
  return {d, d + n_out, group, group + n_out};
}

STRATA_HD inline KColumnScales k_column_scales(DType type, const uint8_t* data, int64_t n_out,
                                               int64_t g) {
  return k_column_scales_in(k_column_layout(type), data, n_out, g);
}

// One group's share of a K-quant input-sparse product: its kept rows and their quantized input
// values, its scales (and mins), and the sum of its quantized input values.
struct KColumnTerms {
  const uint8_t* const* rows;
  const int8_t* xq;
  int n_rows;
  const uint8_t* sc;
  const uint8_t* m;
  int32_t xsum;
};

// Input j's values.
STRATA_HD inline const uint8_t* k_column_row(DType type, const uint8_t* data, int64_t n_out,
                                             int64_t j) {
  const KColumnLayout k = k_column_layout(type);
  return k_column_scales(type, data, n_out, j / k.group).sc +
         static_cast<uint64_t>(n_out) * (k.has_min ? 2 : 1) +
         static_cast<uint64_t>(j % k.group) * k.row_bytes(n_out);
}

// Output i's value in a row (Q2_K 0..3, Q3_K, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63: the file's
// stored quant; Q3_K's 0..7 is the value + 4).
STRATA_HD inline int k_column_quant(DType type, const uint8_t* row, int64_t i) {
  const int64_t p = column_group_position(i), k = p % kColumnChunk;
  const uint8_t* chunk = row + (p - k) / kColumnChunk * k_column_layout(type).chunk_bytes;
  if (type == DType::Q2_K || type == DType::Q3_K) {
    const int two = (chunk[k % 16] >> (2 * (k / 16))) & 3;
    if (type == DType::Q2_K) return two;
    return two | (((chunk[16 + k % 8] >> (k / 8)) & 1) << 2);
  }
  const int low = k < 32 ? chunk[k % 32] & 15 : chunk[k % 32] >> 4;
  if (type == DType::Q5_K) return low | (((chunk[32 + k % 8] >> (k / 8)) & 1) << 4);
  if (type != DType::Q6_K) return low;
  return low | (((chunk[32 + k % 16] >> (2 * (k / 16))) & 3) << 4);
}

// W[i][j] of a copy of `type` at `data` with n_out outputs, as the file's rows dequantize: the
// CPU's reference and the CUDA axpy's decoder of a copy.
STRATA_HD inline float column_group_value(DType type, const uint8_t* data, int64_t n_out, int64_t i,
                                          int64_t j) {
  if (has_block_column_groups(type)) {
    const int q = column_group_quant(type, column_group_row(type, data, n_out, j), i) -
                  (type == DType::Q4_0 ? 8 : 0);
    return f16_to_f32(column_group_scales(type, data, n_out, j / kColumnGroup)[i]) *
           static_cast<float>(q);
  }
  const KColumnScales s = k_column_scales(type, data, n_out, j / k_column_layout(type).group);
  const int q = k_column_quant(type, k_column_row(type, data, n_out, j), i);
  if (type == DType::Q6_K)
    return kquant_value<BlockQ6_K>(f16_to_f32(s.d[i]), 0.0f, static_cast<int8_t>(s.sc[i]), 0, q);
  if (type == DType::Q3_K)
    return kquant_value<BlockQ3_K>(f16_to_f32(s.d[i]), 0.0f, static_cast<int8_t>(s.sc[i]), 0, q);
  const float d = f16_to_f32(s.d[i]), dmin = f16_to_f32(s.dmin[i]);
  if (type == DType::Q5_K) return kquant_value<BlockQ5_K>(d, dmin, s.sc[i], s.m[i], q);
  if (type == DType::Q2_K) return kquant_value<BlockQ2_K>(d, dmin, s.sc[i], s.m[i], q);
  return kquant_value<BlockQ4_K>(d, dmin, s.sc[i], s.m[i], q);
}

// A copy split in two (Layout::ColumnGroupSlots, the flash tier's quantized column bundles):
// each input's row stored apart, and the scale plane, the copy without its rows (per group of a
// Q8_0/Q4_0 copy its n_out scales; per K-quant super-block d (and dmin), then per group its
// scales (and mins)), in the copy's order.

// Bytes of one input's row in a copy with n_out outputs.
STRATA_HD inline uint64_t column_group_input_bytes(DType type, int64_t n_out) {
  return has_block_column_groups(type) ? column_group_row_bytes(type, n_out)
                                       : k_column_layout(type).row_bytes(n_out);
}

STRATA_HD inline KColumnLayout k_column_plane_layout(DType type) {
  KColumnLayout k = k_column_layout(type);
  k.chunk_bytes = 0;
  return k;
}

STRATA_HD inline uint64_t column_group_plane_bytes(DType type, int64_t n_in, int64_t n_out) {
  if (has_block_column_groups(type))
    return static_cast<uint64_t>(n_in / kColumnGroup) * static_cast<uint64_t>(n_out) *
           sizeof(uint16_t);
  return static_cast<uint64_t>(n_in / kQK_K) * k_column_plane_layout(type).super_bytes(n_out);
}

// Group g's scales in a scale plane: a Q8_0/Q4_0 group's f16 scales.
STRATA_HD inline const uint16_t* column_group_plane_scales(const uint8_t* plane, int64_t n_out,
                                                           int64_t g) {
  return reinterpret_cast<const uint16_t*>(plane) + static_cast<uint64_t>(g) * n_out;
}

// A K-quant group's scales (and its super-block's d, dmin) in a scale plane.
STRATA_HD inline KColumnScales k_column_plane_scales(DType type, const uint8_t* plane,
                                                     int64_t n_out, int64_t g) {
  return k_column_scales_in(k_column_plane_layout(type), plane, n_out, g);
}

inline float column_group_weight(const MatrixView& v, int64_t i, int64_t j) {
  return column_group_value(v.type, v.data, v.cols, i, j);
}

}  // namespace strata
