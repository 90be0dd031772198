// Q4_0 weights interleaved by groups of 16 rows, for matrix-vector products that produce 16
// outputs at once. In the file's layout every row is a run of blocks, so a dot product ends in
// a horizontal sum and each block's scale is applied lane by lane; interleaved, one 512-bit
// register holds four quants of each of 16 rows, a broadcast activation quad multiplies all of
// them in one VNNI instruction, and each 32-bit lane accumulates one row: no horizontal sums,
// and the block scales of the 16 rows are one vector. (llama.cpp repacks Q4_0 at load for the
// same reason.) Interleaving is a byte permutation inside each group's own bytes, so it is done
// in place and costs no memory.
//
// A group of 16 rows with nb blocks each occupies 16 * nb * 18 bytes:
//   scales: nb x 16 f16, block-major (all 16 rows' scales of block b together);
//   quants: nb x 4 chunks x 16 rows x 4 bytes: chunk j of row r holds bytes qs[4j .. 4j+3] of
//           the row's block b, i.e. elements 4j..4j+3 in the low nibbles and 16+4j..16+4j+3 in
//           the high nibbles.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

constexpr int64_t kQ4x16Rows = 16;

// Byte size of one interleaved group for rows of `cols` elements.
inline uint64_t q4_0x16_group_bytes(int64_t cols) {
  return static_cast<uint64_t>(cols / kQK) * kQ4x16Rows * sizeof(BlockQ4_0);
}
inline const uint16_t* q4_0x16_scales(const uint8_t* group) {
  return reinterpret_cast<const uint16_t*>(group);
}
inline const uint8_t* q4_0x16_quants(const uint8_t* group, int64_t nb) {
  return group + nb * kQ4x16Rows * 2;
}

// Interleaves `rows` rows (a multiple of 16) of Q4_0 data in place.
void interleave_q4_0x16(uint8_t* data, int64_t rows, int64_t cols);
// Writes row `r` (0..15) of an interleaved group back as plain Q4_0 blocks.
void extract_q4_0x16_row(const uint8_t* group, int64_t cols, int r, BlockQ4_0* out);

}  // namespace strata
