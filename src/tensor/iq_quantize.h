// strata's quantizers of the lattice types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S
// (tensor/iq_quants.h). Each group of 8 (IQ2) or 4 (IQ3) magnitudes becomes the grid entry
// nearest in importance-weighted squared error (a lattice point's own entry, else the nearest
// entries listed for it once per grid), at the sub-block scale that fits best among trial
// scales; signs are stored apart (IQ2_XXS, IQ2_XS, IQ3_XXS: seven per eight values, the
// eighth making their parity even, so an odd count flips the sign of the value it costs least);
// the sub-block scales become 4-bit odd multiples of the block's f16 scale, and each group is
// searched again at the scale the reader will use. The same ideas as llama.cpp's quantizers,
// not their code: the bytes differ, the error is what the tests bound.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

bool has_iq_quantizer(DType type);
// Rows of n values (a multiple of 256); importance (null: none) weighs each column's error, as
// llama-imatrix's mean squared inputs do.
void quantize_row_iq(DType type, const float* src, void* dst, int64_t n, const float* importance);

}  // namespace strata
