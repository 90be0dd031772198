// A 16 x 16 transpose of 32-bit lanes in 512-bit registers, for translation units compiled with
// AVX-512 (Q6_K rows repacked for a batch, attention panels' keys, the BF16 tile products'
// activations and outputs).
// Internal linkage: it must not leave AVX-512 code behind for another translation unit.
#pragma once

#include <immintrin.h>

namespace strata {

// r[i] lane j becomes r[j] lane i.
static inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + e], 128-bit lane L: element 4L + e of rows 4i .. 4i + 3.
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);
    const __m512i x1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xdd);
    const __m512i y0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
    const __m512i y1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xdd);
    r[e] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
    r[4 + e] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
  }
}

}  // namespace strata
