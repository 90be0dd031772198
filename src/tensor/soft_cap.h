// Gemma 2's soft caps, cap * tanh(x / cap), in f32 as llama.cpp's graphs compute them (x scaled
// by 1 / cap, tanh, scaled by cap): the logits' on the host, attention scores' in the CUDA
// kernels (the CPU's attention has its own twin made of its exponential, attention_exp.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace strata {

STRATA_HD inline float soft_cap(float x, float cap) {
  return tanhf(x * (1.0f / cap)) * cap;
}

inline void soft_cap_all(float* x, int64_t count, float cap) {
  for (int64_t i = 0; i < count; ++i) x[i] = soft_cap(x[i], cap);
}

}  // namespace strata
