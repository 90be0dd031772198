// Builds the Q8_0, Q4_0 and K-quant (Q2_K..Q6_K) column-group copies (tensor/column_groups.h)
// input-sparse products read for quantized matrices: the values and scales of the file, regrouped,
// never re-quantized.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/matrix.h"

namespace strata {

// Whether `parts` (the matrices that read one input, stacked: their outputs one after the
// other) have one column-group copy: every part of one type with column groups (Q8_0, Q4_0,
// Q2_K..Q6_K) in the file's rows, the same inputs, a multiple of 32 (K-quants: 256) of them
// and a multiple of 64 outputs in all.
bool column_groups_apply(std::span<const MatrixView> parts);
// The copy's bytes (column_groups_apply must hold).
uint64_t column_groups_copy_bytes(std::span<const MatrixView> parts);
// Writes the copy to `out` (column_groups_copy_bytes bytes) and returns its view.
MatrixView build_column_groups(std::span<const MatrixView> parts, uint8_t* out);

// A copy split in two (tensor/column_groups.h, the flash tier's quantized column bundles):
// input j's row (column_group_input_bytes) and the scale plane (column_group_plane_bytes),
// written to `plane`.
const uint8_t* column_group_input_row(const MatrixView& copy, int64_t j);
void write_scale_plane(const MatrixView& copy, uint8_t* plane);

}  // namespace strata
