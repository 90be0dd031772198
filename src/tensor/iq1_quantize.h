// strata's quantizers of IQ1_S and IQ1_M (tensor/iq_quants.h): each group of 8 values x is
// s * (g + delta), g an entry of the {-1, 0, 1}^8 grid and delta = +-1/8, one delta per unit
// (IQ1_S) or per group (IQ1_M), one 3-bit scale per unit (IQ1_S) or per 16 values (IQ1_M). The
// entries are found on the grid's lattice (tensor/iq_lattice.h) at trial scales, both deltas
// tried, the best fit kept; then the scales become odd multiples of the f16 block scale, every
// group is searched again at the scale the reader uses, and the block scale keeps the block's
// importance-weighted projection, as for the other lattice types (tensor/iq_quantize.h).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

// Rows of n values (a multiple of 256) as IQ1_S or IQ1_M; importance may be null.
void quantize_row_iq1(DType type, const float* src, void* dst, int64_t n, const float* importance);

}  // namespace strata
