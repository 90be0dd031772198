// Conversion of rows between f32 and every computable type. Q8_0 and Q4_0 follow ggml's
// reference quantizers (Q8_0: scale = max|x|/127, round to nearest; Q4_0: scale = signed max /
// -8); the K-quants have strata's own (tensor/kquants.cpp).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

// n must be a multiple of the type's block size.
void quantize_row(DType type, const float* src, void* dst, int64_t n);
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);

}  // namespace strata
