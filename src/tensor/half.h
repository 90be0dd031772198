// Scalar conversions between f32 and the 16-bit float formats, bit-exact with IEEE-754
// round-to-nearest-even (what F16C and ggml's converters produce). STRATA_HD: the CUDA kernels
// convert with these same functions (the KV cache's f16 entries, f16 and bf16 weights).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace strata {

STRATA_HD inline float bits_to_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
STRATA_HD inline uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

STRATA_HD inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    int e = -1;  // subnormal: normalise the mantissa
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    return bits_to_f32(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13);
  }
  return bits_to_f32(sign | (exp + 127 - 15) << 23 | mant << 13);
}

STRATA_HD inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;   // nan
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to inf
  if (abs < 0x38800000u) {                       // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;          // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) - 1 ... gives mant >> (126 - e) in units
    uint32_t value = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (value & 1))) ++value;
    return sign | static_cast<uint16_t>(value);
  }
  uint32_t value = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (value & 1))) ++value;
  return sign | static_cast<uint16_t>(value);
}

STRATA_HD inline float bf16_to_f32(uint16_t h) {
  return bits_to_f32(static_cast<uint32_t>(h) << 16);
}

STRATA_HD inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace strata
