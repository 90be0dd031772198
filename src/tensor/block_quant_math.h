// Q8_0 and Q4_0 blocks one at a time, in functions both compilers build (STRATA_HD): the
// quantizers strata writes weights and KV cache rows with, and one element's value, so the CPU
// and the CUDA kernels store a KV row (-ctk q8_0) as the same bytes and read it as the same
// values. Layouts are llama.cpp's (tensor/dtype.h's BlockQ8_0, BlockQ4_0).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "tensor/dtype.h"
#include "tensor/half.h"

namespace strata {

STRATA_HD inline void store_block_scale(uint8_t* block, float d) {
  const uint16_t h = f32_to_f16(d);
  block[0] = static_cast<uint8_t>(h & 0xff);
  block[1] = static_cast<uint8_t>(h >> 8);
}

STRATA_HD inline float block_scale(const uint8_t* block) {
  return f16_to_f32(static_cast<uint16_t>(block[0] | (block[1] << 8)));
}

// 32 values to a block of 34 bytes: d = max |x| / 127, q = round(x / d) (halves away from 0).
STRATA_HD inline void quantize_block_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_block_scale(block, d);
  for (int j = 0; j < kQK; ++j)
    block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(roundf(x[j] * id)));
}

// 32 values to a block of 18 bytes: d = -(the value of largest magnitude) / 8, q = x / d + 8
// truncated after adding 0.5 and clamped to 15; value j in the low nibble of byte j (j < 16),
// value j + 16 in its high nibble.
STRATA_HD inline void quantize_block_q4_0(const float* x, uint8_t* block) {
  float amax = 0.0f, max = 0.0f;  // max keeps the sign of the largest magnitude
  for (int j = 0; j < kQK; ++j) {
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_block_scale(block, d);
  for (int j = 0; j < kQK / 2; ++j) {
    const float lo_value = x[j] * id + 8.5f, hi_value = x[j + kQK / 2] * id + 8.5f;
    const int lo = static_cast<int>(lo_value) < 15 ? static_cast<int>(lo_value) : 15;
    const int hi = static_cast<int>(hi_value) < 15 ? static_cast<int>(hi_value) : 15;
    block[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Element i of a run of Q8_0 or Q4_0 blocks (a KV cache's rows, whose widths are whole blocks).
STRATA_HD inline float block_value(DType type, const uint8_t* blocks, int64_t i) {
  const int64_t b = i / kQK;
  const int j = static_cast<int>(i % kQK);
  if (type == DType::Q8_0) {
    const uint8_t* block = blocks + b * 34;
    return block_scale(block) * static_cast<float>(static_cast<int8_t>(block[2 + j]));
  }
  const uint8_t* block = blocks + b * 18;
  const uint8_t q = block[2 + (j % (kQK / 2))];
  const int nibble = j < kQK / 2 ? (q & 15) : (q >> 4);
  return block_scale(block) * static_cast<float>(nibble - 8);
}

}  // namespace strata
