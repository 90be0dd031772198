// Conversion of rows between f32 and the weight types. Q8_0 and Q4_0 follow ggml's reference
// quantizers (Q8_0: scale = max|x|/127, round to nearest; Q4_0: scale = signed max / -8); the
// K-quants have strata's own (tensor/kquants.cpp), the unit types tensor/unit_quantize.cpp.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

// n must be a multiple of the type's block size. Both go through the type table (dtype.h):
// a type without a codec there fails naming it.
void quantize_row(DType type, const float* src, void* dst, int64_t n);
// With one importance per value (may be null): the type's importance-weighted quantizer where it
// has one (the K-quants), else the plain one, as llama-quantize ignores an importance matrix
// for types that take none.
void quantize_row(DType type, const float* src, void* dst, int64_t n, const float* importance);
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// The float, Q8_0 and Q4_0 rows of the type table.
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_any(const float* src, void* dst, int64_t n);
void quantize_row_q4_0_any(const float* src, void* dst, int64_t n);
void dequantize_row_f32(const void* src, float* dst, int64_t n);
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0_any(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0_any(const void* src, float* dst, int64_t n);

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
// Activations for Q8_0/Q4_0 products, bit for bit as llama.cpp's x86 CPU quantizes them (its
// AVX2 quantize_row_q8_0, not the reference it quantizes weights with): d = max|x| / 127 kept
// as f16, q = x * (127 / max|x|) rounded half to even. The same integer products as llama.cpp
// on the same file.
void quantize_row_q8_0_activations(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);

}  // namespace strata
