// Q4_0, Q8_0, Q4_K and the nibble unit types interleaved by groups of 16 rows, for matrix-vector
// products that produce 16 outputs at once. In the file's layout every row is a run of blocks, so a
// dot product ends in a horizontal sum and each block's scale is applied lane by lane; interleaved,
// one 512-bit register holds four quants of each of 16 rows, a broadcast activation quad
// multiplies all of them in one VNNI instruction, and each 32-bit lane accumulates one row: no
// horizontal sums, and the block scales of the 16 rows are one vector. The same bytes are AMX's
// tile B as they lie. (llama.cpp repacks Q4_0 at load for the same reason.) Interleaving is a
// byte permutation inside each group's own bytes, so it is done in place and costs no memory.
//
// A group of 16 rows with nb blocks each occupies 16 * nb * block bytes:
//   scales: nb x 16 f16, block-major (all 16 rows' scales of block b together);
//   quants: nb x C chunks x 16 rows x 4 bytes, chunk j of row r holding bytes qs[4j .. 4j+3] of
//           the row's block b. Q8_0: C = 8, elements 4j..4j+3. Q4_0: C = 4, elements 4j..4j+3 in
//           the low nibbles and 16+4j..16+4j+3 in the high nibbles.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

constexpr int64_t kInterleavedRows = 16;

// Q4_K groups of 16 rows are super-block-major: for each super-block s, 2304 bytes:
//   d of the 16 rows (16 f16), dmin (16 f16), the rows' 12 scale bytes as three 4-byte words,
//   word w of rows 0..15 together (3 x 64 bytes), then the quants: 32 chunks, chunk k holding
//   bytes qs[4k .. 4k+3] of each of the 16 rows (64 bytes): values 64m + 4j .. +3 in the low
//   nibbles and 64m + 32 + 4j .. +3 in the high ones, for k = 8m + j.
// So one 256-bit register holds 8 rows' quants, a broadcast activation word multiplies them all,
// and each 32-bit lane accumulates one row's integer sums: no per-super-block horizontal sum.
constexpr uint64_t kQ4KGroupBlockBytes = 16 * 144;
//
// Unit types with nibble quants (unit_quants.h, kNibbleUnits: Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS,
// MXFP4) are block-major: for each block b of the type, 16 * block bytes:
//   header: the H bytes before the block's quants (H = block bytes - values / 2) of the 16 rows,
//           as planes of 2-byte words (word w of row r at 32w + 2r; H = 1: byte r);
//   quants: chunks of 4 bytes, chunk c of row r at 16H + 64c + 4r holding bytes 4c .. 4c + 3 of
//           the row's block quants (unit u = chunks 4u .. 4u + 3: values 32u + 4j .. + 3 in the
//           low nibbles, 32u + 16 + 4j .. + 3 in the high ones, for c = 4u + j).
// So a register holds one chunk of 16 (or 8) rows, as for Q4_0, and the scales of the 16 rows
// load as one vector.
bool interleavable(DType type);
// Header bytes (H above) of a unit type's block.
int64_t unit_group_header_bytes(DType type);
// Quant bytes of one row's block, and 4-byte chunks of them.
inline int64_t interleaved_quant_bytes(DType type) {
  return type == DType::Q8_0 ? kQK : kQK / 2;
}
// Byte size of one interleaved group for rows of `cols` elements.
inline uint64_t interleaved_group_bytes(DType type, int64_t cols) {
  if (type == DType::Q4_K) return static_cast<uint64_t>(cols / 256) * kQ4KGroupBlockBytes;
  if (type != DType::Q4_0 && type != DType::Q8_0) return kInterleavedRows * row_bytes(type, cols);
  return static_cast<uint64_t>(cols / kQK) * kInterleavedRows *
         (2 + static_cast<uint64_t>(interleaved_quant_bytes(type)));
}
inline const uint16_t* interleaved_scales(const uint8_t* group) {
  return reinterpret_cast<const uint16_t*>(group);
}
inline const uint8_t* interleaved_quants(const uint8_t* group, int64_t nb) {
  return group + nb * kInterleavedRows * 2;
}

// Interleaves `rows` rows (a multiple of 16) of an interleavable type in place.
void interleave_rows16(DType type, uint8_t* data, int64_t rows, int64_t cols);
// Writes row `r` (0..15) of an interleaved group back as plain blocks (row_bytes(type, cols)).
void extract_row16(DType type, const uint8_t* group, int64_t cols, int r, uint8_t* out);

}  // namespace strata
