// The exponential of attention's softmax, as every CPU kernel variant computes it: a Cody-Waite
// reduction by ln 2 and a degree-7 Horner polynomial (Cephes' expf coefficients), each step one
// float operation or one fused multiply-add, so the SIMD kernels, lane by lane, give these bits
// (kernels_avx2_attention.inc mirrors every line). Within 2 ulp of exp on [-87, 0], the
// softmax's range (scores minus their maximum); below -87 it is 0 (e^-87 ~ 1.6e-38, nothing next
// to the maximum's 1), as it is for -inf (a masked score).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace strata {

inline constexpr float kAttentionExpMin = -87.0f;
inline constexpr float kAttentionLog2e = 1.44269504088896341f;
inline constexpr float kAttentionLn2Hi = 0.693359375f;  // ln 2 = hi + lo, hi with 9 bits
inline constexpr float kAttentionLn2Lo = -2.12194440e-4f;
// Highest power first: exp(r) ~ 1 + r + r^2 (c0 r^5 + ... + c5), Horner throughout.
inline constexpr float kAttentionExpPoly[8] = {1.9875691500e-4f, 1.3981999507e-3f,
                                               8.3334519073e-3f, 4.1665795894e-2f,
                                               1.6666665459e-1f, 5.0000001201e-1f,
                                               1.0f,             1.0f};

// Internal linkage: the AVX2 kernels' translation unit compiles its own copy with FMA and
// rounding instructions, which must not replace the baseline build's.
static inline float attention_exp(float x) {
  if (!(x >= kAttentionExpMin)) return 0.0f;
  const float n = std::nearbyint(x * kAttentionLog2e);
  float r = std::fma(-n, kAttentionLn2Hi, x);
  r = std::fma(-n, kAttentionLn2Lo, r);
  float p = kAttentionExpPoly[0];
  for (int i = 1; i < 8; ++i) p = std::fma(p, r, kAttentionExpPoly[i]);
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// Gemma 2's soft cap of a score, cap * tanh(s / cap), through attention_exp as the SIMD kernels
// compute it lane by lane: x = s * inv_cap, tanh |x| = (1 - e) / (1 + e) with e = exp(-2 |x|)
// (0 beyond |x| = 43.5, where tanh is 1 in float), the sign of x put back, times cap.
static inline float attention_soft_cap(float s, float cap, float inv_cap) {
  const float x = s * inv_cap;
  const float e = attention_exp(-2.0f * std::fabs(x));
  const float t = (1.0f - e) / (1.0f + e);
  return std::copysign(t, x) * cap;
}

}  // namespace strata
