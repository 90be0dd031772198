// The CPU kernel table. Every entry has a plain scalar reference (kernels_scalar.cpp); SIMD
// variants implement the same functions and are chosen once at run time from the CPU's
// features (dispatch.cpp). Setting STRATA_CPU=scalar|avx2 forces a variant.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

struct CpuKernels {
  const char* name;
  // Dot products of one weight row with the activation vector, n elements. Q8_0 and Q4_0
  // rows are multiplied with the activation quantized to Q8_0 blocks.
  float (*dot_f32)(const float* w, const float* x, int64_t n);
  float (*dot_f16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_bf16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_q8_0)(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
  float (*dot_q4_0)(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
  // Quantizes the activation once per matrix product.
  void (*quantize_q8_0)(const float* x, BlockQ8_0* y, int64_t n);
};

const CpuKernels& scalar_kernels();
const CpuKernels* avx2_kernels();  // nullptr when not built for this target or CPU lacks it
const CpuKernels& best_kernels();  // the variant used by the engine

}  // namespace strata
