// AVX2 + FMA + F16C kernels. This file is compiled with -mavx2 -mfma -mf16c and must only be
// entered after dispatch.cpp has checked the CPU; it uses no inline functions shared with other
// translation units, so no AVX2 code can leak into the baseline build.
//
// kernels_avx2_vnni.cpp compiles this same file a second time with STRATA_KERNELS_VNNI set and
// AVX-512 VL/VNNI enabled: the int8 products then use vpdpbusd on 256-bit registers (one
// instruction for maddubs + madd), which matters because these loops are bound by the vector
// ALU ports. 512-bit registers were measured slower: they leave only two ALU ports.
#include "kernels/cpu/kernels.h"
#include "tensor/half_table.h"
#include "tensor/interleaved_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

namespace strata {

namespace {

// Weights stream from RAM once per token; the hardware prefetcher alone leaves the loops
// waiting on memory. Each loop iteration asks for the cache lines `distance` bytes ahead of
// what it reads, spread evenly through the computation (prefetches past the end are harmless).
// Distances per type were tuned with `strata bench` on 1B models (2 threads, huge pages),
// re-measured in session 2 (decode tok/s, medians of 3): F16 1024: 13.8, 4096: 15.4, 8192:
// 14.9; Q8_0 512: 24.0, 1024: 25.6, 2048: 22.3; Q4_0 1024: 38.8, 4096: 41.5, 16384: 39.4.
// Interleaved Q4_0 (session 3, 3 alternating rounds): 1024: 42.6/41.4/40.4, 2048: 43.2/42.4/
// 43.1, 4096: 38.9/38.0/38.6.
constexpr int kPrefetchFloat = 4096, kPrefetchQ8 = 1024, kPrefetchQ4 = 4096;
constexpr int kPrefetchQ4x16 = 2048, kPrefetchQ8x16 = 2048;
inline void prefetch_ahead(const void* p, int distance, int lines) {
  const char* c = static_cast<const char*>(p) + distance;
  for (int i = 0; i < lines; ++i) _mm_prefetch(c + 64 * i, _MM_HINT_T0);
}
// The float dot kernels prefetch into L2 only: each core has few L1 miss buffers and L1
// prefetches hold them for the whole trip to RAM, which capped the F16 matrix-vector product at
// 20 GB/s on 2 threads; into L2 it reached 26 GB/s (BM_MatVec F16 512MiB, session 3). The
// quantized kernels measured the same or slower this way (Q4_0 22 -> 19 GB/s) and keep L1.
inline void prefetch_ahead_l2(const void* p, int distance, int lines) {
  const char* c = static_cast<const char*>(p) + distance;
  for (int i = 0; i < lines; ++i) _mm_prefetch(c + 64 * i, _MM_HINT_T2);
}

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// D: prefetch distance; 0 for rows read out of order (gather_dot_*), where the lines past a
// row's end belong to a neighbour nobody asked for (they halved F16 gather throughput).
template <int D = kPrefetchFloat>
float dot_f32(const float* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 2);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <int D = kPrefetchFloat>
float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 1);
    a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load_f16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load_f16(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load_f16(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) sum += half_to_float(w[i]) * x[i];
  return sum;
}

inline __m256 load_bf16(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

template <int D = kPrefetchFloat>
float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 1);
    a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load_bf16(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load_bf16(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(w[i]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    sum += f * x[i];
  }
  return sum;
}

// Sums of 4 adjacent u8 x s8 products as 8 int32 lanes.
inline __m256i unsigned_by_signed_dot(__m256i u, __m256i s) {
#if defined(STRATA_KERNELS_VNNI)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// Sum of 32 signed int8 products as 8 int32 lanes, via the unsigned-by-signed multiply.
inline __m256 int8_dot_as_float(__m256i a, __m256i b) {
  const __m256i abs_a = _mm256_sign_epi8(a, a);
  const __m256i signed_b = _mm256_sign_epi8(b, a);
  return _mm256_cvtepi32_ps(unsigned_by_signed_dot(abs_a, signed_b));
}

// Runs block(b, acc) over all blocks with four independent accumulators, so the FMA latency
// (4 cycles) never serialises the loop.
template <typename Block>
inline __m256 sum_blocks_lanes(const void* w, int block_bytes, int distance, int64_t nb,
                               Block block) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    if (distance > 0)
      prefetch_ahead(static_cast<const char*>(w) + b * block_bytes, distance,
                     (4 * block_bytes + 63) / 64);
    acc[0] = block(b, acc[0]);
    acc[1] = block(b + 1, acc[1]);
    acc[2] = block(b + 2, acc[2]);
    acc[3] = block(b + 3, acc[3]);
  }
  for (; b < nb; ++b) acc[0] = block(b, acc[0]);
  return _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
}

template <typename Block>
inline float sum_blocks(const void* w, int block_bytes, int distance, int64_t nb, Block block) {
  return hsum(sum_blocks_lanes(w, block_bytes, distance, nb, block));
}

// Scales are broadcast straight from memory (the f16 table, the activation's f32 scales): pure
// loads, keeping the shuffle port free; converting f16 per block was the bottleneck.
template <int D = kPrefetchQ8>
float dot_q8_0(const BlockQ8_0* w, const Q8Activation& x, int64_t n) {
  const float* f16 = f16_to_f32_table();
  return sum_blocks(w, sizeof(BlockQ8_0), D, n / 32, [&](int64_t b, __m256 acc) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.blocks[b].qs));
    const __m256 p = _mm256_mul_ps(int8_dot_as_float(wq, xq), _mm256_broadcast_ss(&x.scale[b]));
    return _mm256_fmadd_ps(p, _mm256_broadcast_ss(&f16[w[b].d]), acc);
  });
}

// A Q4_0 block's quants as unsigned 0..15 in element order: the 16 bytes are broadcast to both
// halves (a pure load), the upper half shifted to its high nibbles, then masked.
inline __m256i unpack_q4_unsigned(const uint8_t* qs) {
  const __m256i bytes =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i both = _mm256_blend_epi32(bytes, _mm256_srli_epi16(bytes, 4), 0xf0);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

#if defined(STRATA_KERNELS_VNNI)
// With VNNI the nibbles need no shifting: the 16 bytes broadcast to both halves are masked with
// 0x0f (lower half: elements 0..15) and 0xf0 (upper half: elements 16..31 times 16). vpdpbusd
// sums 4 products into int32 without saturation, so the upper lanes are exactly 16 x the true
// sums; their offsets are 16 x too (q4_lane_offsets), and the final lane sum weighs them 1/16
// (exact). One ALU operation of unpacking per block instead of three.
template <int D = kPrefetchQ4>
float dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n) {
  const float* f16 = f16_to_f32_table();
  const __m256i mask =
      _mm256_set_m128i(_mm_set1_epi8(static_cast<char>(0xf0)), _mm_set1_epi8(0x0f));
  const __m256 lanes =
      sum_blocks_lanes(w, sizeof(BlockQ4_0), D, n / 32, [&](int64_t b, __m256 acc) {
        const __m256i q = _mm256_and_si256(
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs))),
            mask);
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.blocks[b].qs));
        const __m256 p = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, xq));
        const __m256 t = _mm256_fmsub_ps(p, _mm256_broadcast_ss(&x.scale[b]),
                                         _mm256_loadu_ps(x.q4_lane_offsets + 8 * b));
        return _mm256_fmadd_ps(t, _mm256_broadcast_ss(&f16[w[b].d]), acc);
      });
  return hsum(
      _mm256_mul_ps(lanes, _mm256_setr_ps(1, 1, 1, 1, 1.0f / 16, 1.0f / 16, 1.0f / 16, 1.0f / 16)));
}
#else
// sum((q - 8) x) = sum(q x) - 8 sum(x): q is unsigned, so maddubs takes it directly; the second
// term is spread over the 8 lanes as scale * sum(x) each (Q8Activation::scaled_sum).
template <int D = kPrefetchQ4>
float dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n) {
  const float* f16 = f16_to_f32_table();
  return sum_blocks(w, sizeof(BlockQ4_0), D, n / 32, [&](int64_t b, __m256 acc) {
    const __m256i q = unpack_q4_unsigned(w[b].qs);
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.blocks[b].qs));
    const __m256 p = _mm256_cvtepi32_ps(unsigned_by_signed_dot(q, xq));
    const __m256 t =
        _mm256_fmsub_ps(p, _mm256_broadcast_ss(&x.scale[b]), _mm256_broadcast_ss(&x.scaled_sum[b]));
    return _mm256_fmadd_ps(t, _mm256_broadcast_ss(&f16[w[b].d]), acc);
  });
}
#endif

// Interleaved Q4_0 (tensor/interleaved_rows.h): each 32-bit lane is one of the 16 rows and receives
// four quants x four broadcast activation values per int8 instruction. The integer block sum
// starts at -8 * sum(x) (Q4_0's offset), and every block is scaled and added exactly as the
// scalar reference does (multiply, then add: this file is compiled without FMA contraction).
// Prefetching: a block is 256 bytes of quants (4 lines) and 32 bytes of scales.
#if defined(STRATA_KERNELS_VNNI)
void matvec_q4_0x16(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const uint8_t* q = interleaved_quants(group, nb);
  const __m512i low = _mm512_set1_epi8(0x0f), high = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * 256;
    prefetch_ahead(qb, kPrefetchQ4x16, 4);
    if ((b & 1) == 0) prefetch_ahead(d + b * 16, kPrefetchQ4x16 / 8, 1);
    const int8_t* xq = x.blocks[b].qs;
    // High nibbles masked in place are 16 x the quant; their sum is shifted back exactly.
    __m512i lo = _mm512_set1_epi32(x.minus_8_sum[b]), hi = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      int32_t xl, xh;
      __builtin_memcpy(&xl, xq + 4 * j, 4);
      __builtin_memcpy(&xh, xq + 16 + 4 * j, 4);
      const __m512i v = _mm512_loadu_si512(qb + 64 * j);
      lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, low), _mm512_set1_epi32(xl));
      hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(v, high), _mm512_set1_epi32(xh));
    }
    const __m512i sum = _mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4));
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + b * 16)));
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(x.scale[b]));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), s));
  }
  _mm512_storeu_ps(out, acc);
}
#else
// Rows 0..7 and 8..15 in two 256-bit halves. maddubs pairs stay far from int16 saturation:
// eight of them add up to at most 8 * 2 * 15 * 127 = 30480.
void matvec_q4_0x16(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const uint8_t* q = interleaved_quants(group, nb);
  const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * 256;
    prefetch_ahead(qb, kPrefetchQ4x16, 4);
    if ((b & 1) == 0) prefetch_ahead(d + b * 16, kPrefetchQ4x16 / 8, 1);
    const int8_t* xq = x.blocks[b].qs;
    __m256i xl[4], xh[4];
    for (int j = 0; j < 4; ++j) {
      int32_t l, h;
      __builtin_memcpy(&l, xq + 4 * j, 4);
      __builtin_memcpy(&h, xq + 16 + 4 * j, 4);
      xl[j] = _mm256_set1_epi32(l);
      xh[j] = _mm256_set1_epi32(h);
    }
    const __m256 sx = _mm256_set1_ps(x.scale[b]);
    for (int h = 0; h < 2; ++h) {
      __m256i pairs = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 64 * j + 32 * h));
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(_mm256_and_si256(v, low), xl[j]));
        pairs = _mm256_add_epi16(
            pairs, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), xh[j]));
      }
      const __m256i sum =
          _mm256_add_epi32(_mm256_madd_epi16(pairs, ones), _mm256_set1_epi32(x.minus_8_sum[b]));
      const __m256 dw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + b * 16 + 8 * h)));
      acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, sx)));
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}
#endif

// Interleaved Q8_0: both factors are signed. With VNNI the activation is made unsigned (x + 128,
// one xor per broadcast) and the excess 128 * sum(w) removed with a second vpdpbusd of the
// weights by ones (the integer result is exact either way). Plain AVX2 uses maddubs with the
// sign moved onto the activation, |w| * sign(x, w): pairs stay below 2 * 127 * 127.
#if defined(STRATA_KERNELS_VNNI)
void matvec_q8_0x16(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const uint8_t* q = interleaved_quants(group, nb);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80)), ones = _mm512_set1_epi8(1);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * 512;
    prefetch_ahead(qb, kPrefetchQ8x16, 8);
    if ((b & 1) == 0) prefetch_ahead(d + b * 16, kPrefetchQ8x16 / 16, 1);
    const int8_t* xq = x.blocks[b].qs;
    __m512i dot0 = _mm512_setzero_si512(), dot1 = _mm512_setzero_si512();
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    for (int j = 0; j < 8; j += 2) {
      int32_t x0, x1;
      __builtin_memcpy(&x0, xq + 4 * j, 4);
      __builtin_memcpy(&x1, xq + 4 * j + 4, 4);
      const __m512i v0 = _mm512_loadu_si512(qb + 64 * j);
      const __m512i v1 = _mm512_loadu_si512(qb + 64 * j + 64);
      dot0 = _mm512_dpbusd_epi32(dot0, _mm512_xor_si512(_mm512_set1_epi32(x0), bias), v0);
      dot1 = _mm512_dpbusd_epi32(dot1, _mm512_xor_si512(_mm512_set1_epi32(x1), bias), v1);
      sum0 = _mm512_dpbusd_epi32(sum0, ones, v0);
      sum1 = _mm512_dpbusd_epi32(sum1, ones, v1);
    }
    const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(dot0, dot1),
                                         _mm512_slli_epi32(_mm512_add_epi32(sum0, sum1), 7));
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + b * 16)));
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(x.scale[b]));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), s));
  }
  _mm512_storeu_ps(out, acc);
}
#else
void matvec_q8_0x16(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const uint8_t* q = interleaved_quants(group, nb);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * 512;
    prefetch_ahead(qb, kPrefetchQ8x16, 8);
    if ((b & 1) == 0) prefetch_ahead(d + b * 16, kPrefetchQ8x16 / 16, 1);
    const int8_t* xq = x.blocks[b].qs;
    const __m256 sx = _mm256_set1_ps(x.scale[b]);
    for (int h = 0; h < 2; ++h) {
      __m256i sum = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        int32_t xv;
        __builtin_memcpy(&xv, xq + 4 * j, 4);
        const __m256i w =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 64 * j + 32 * h));
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                   _mm256_sign_epi8(_mm256_set1_epi32(xv), w));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
      }
      const __m256 dw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + b * 16 + 8 * h)));
      acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, sx)));
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}
#endif

// Same arithmetic as the scalar quantizer (scale = max|x|/127, round half away from zero), so
// both produce identical blocks.
void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = src + b * 32;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 scale = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_mul_ps(v[k], scale);
      // Round half away from zero exactly as lround: t = trunc(s); s - t is exact for
      // |s| <= 127, so comparing it with 0.5 decides the rounding without a float add.
      const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 frac = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(s, t));
      const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
      const __m256 step = _mm256_or_ps(_mm256_and_ps(s, sign_mask), _mm256_set1_ps(1.0f));
      q[k] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, step)));
    }
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    // packs interleave 128-bit lanes; restore element order.
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs), p);
  }
}

// Prompt batches: register tiles of R weight rows x T activation vectors. Each step loads (and
// converts) R weight vectors and T activation vectors for R * T fused multiply-adds, one
// accumulator per pair, so the loop is bound by the FMA ports, not by loads or conversions.
// With AVX-512: 512-bit vectors, 4 x 6 tiles (24 accumulators + 4 weights + 1 activation of 32
// registers); this CPU issues two 512-bit FMAs per cycle, as many as 256-bit ones, so 512 bits
// double the rate. Plain AVX2 has 16 registers: 256-bit, 2 x 4 tiles.
#if defined(STRATA_KERNELS_VNNI)
using TileVec = __m512;
constexpr int kTileLanes = 16, kTileRows = 4, kTileTokens = 6;
inline TileVec tile_load(const float* p) {
  return _mm512_loadu_ps(p);
}
inline TileVec tile_load(const uint16_t* p, bool bf16) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}
inline TileVec tile_fma(TileVec a, TileVec b, TileVec c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline float tile_sum(TileVec v) {
  return _mm512_reduce_add_ps(v);
}
inline TileVec tile_zero() {
  return _mm512_setzero_ps();
}
#else
using TileVec = __m256;
constexpr int kTileLanes = 8, kTileRows = 2, kTileTokens = 4;
inline TileVec tile_load(const float* p) {
  return _mm256_loadu_ps(p);
}
inline TileVec tile_load(const uint16_t* p, bool bf16) {
  return bf16 ? load_bf16(p) : load_f16(p);
}
inline TileVec tile_fma(TileVec a, TileVec b, TileVec c) {
  return _mm256_fmadd_ps(a, b, c);
}
inline float tile_sum(TileVec v) {
  return hsum(v);
}
inline TileVec tile_zero() {
  return _mm256_setzero_ps();
}
#endif

inline float element(const float* w, int64_t j, bool) {
  return w[j];
}
inline float element(const uint16_t* w, int64_t j, bool bf16) {
  if (!bf16) return half_to_float(w[j]);
  const uint32_t bits = static_cast<uint32_t>(w[j]) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline TileVec tile_load(const float* p, bool) {
  return tile_load(p);
}

// out[r * out_stride + t] = w_r . x_t for an R x T tile.
template <int R, int T, class W>
inline void dot_tile(const W* w, int64_t stride, const float* const* x, int64_t n, bool bf16,
                     float* out, int64_t out_stride) {
  TileVec acc[R][T];
  for (auto& row : acc)
    for (auto& a : row) a = tile_zero();
  int64_t i = 0;
  for (; i + kTileLanes <= n; i += kTileLanes) {
    TileVec wv[R];
    for (int r = 0; r < R; ++r) wv[r] = tile_load(w + r * stride + i, bf16);
    for (int t = 0; t < T; ++t) {
      const TileVec xv = tile_load(x[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t] = tile_fma(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float sum = tile_sum(acc[r][t]);
      for (int64_t j = i; j < n; ++j) sum += element(w + r * stride, j, bf16) * x[t][j];
      out[r * out_stride + t] = sum;
    }
}

// The last token tile of a row group has 1..T-1 vectors.
template <int R, class W>
inline void dot_tile_tokens(const W* w, int64_t stride, const float* const* x, int n_x, int64_t n,
                            bool bf16, float* out, int64_t out_stride) {
  int t = 0;
  for (; t + kTileTokens <= n_x; t += kTileTokens)
    dot_tile<R, kTileTokens>(w, stride, x + t, n, bf16, out + t, out_stride);
  switch (n_x - t) {
#define STRATA_TOKENS_CASE(k)                                                                      \
  case k:                                                                                          \
    if constexpr (k < kTileTokens) dot_tile<R, k>(w, stride, x + t, n, bf16, out + t, out_stride); \
    break;
    STRATA_TOKENS_CASE(1)
    STRATA_TOKENS_CASE(2)
    STRATA_TOKENS_CASE(3)
    STRATA_TOKENS_CASE(4)
    STRATA_TOKENS_CASE(5)
#undef STRATA_TOKENS_CASE
    default:
      break;
  }
}

// Rows are walked in groups of R; each group's weights (R rows, a few KiB) stay in L1 while
// every token tile passes over them, the activations coming from L2.
template <class W>
inline void dot_rows_tiled(const W* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                           int64_t n, bool bf16, float* out) {
  int r = 0;
  for (; r + kTileRows <= n_rows; r += kTileRows)
    dot_tile_tokens<kTileRows>(w + r * stride, stride, x, n_x, n, bf16, out + r * n_x, n_x);
  for (; r < n_rows; ++r)
    dot_tile_tokens<1>(w + r * stride, stride, x, n_x, n, bf16, out + r * n_x, n_x);
}

void dot_f32_tile(const float* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                  int64_t n, float* out) {
  dot_rows_tiled(w, stride, n_rows, x, n_x, n, false, out);
}

void dot_f16_tile(const uint16_t* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                  int64_t n, float* out) {
  dot_rows_tiled(w, stride, n_rows, x, n_x, n, false, out);
}

void dot_bf16_tile(const uint16_t* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                   int64_t n, float* out) {
  dot_rows_tiled(w, stride, n_rows, x, n_x, n, true, out);
}

// Multi-row axpy: y is walked in chunks of 32 elements held in four registers while every row
// adds into them (in row order, so the result equals row-by-row fused multiply-adds). Chunks
// start at multiples of 32 from the slice start, and slices start at multiples of 64, so an
// element meets the same instructions whatever the split; only a row's last n % 32 elements
// take the 8-wide and scalar tails.
template <class Load>
inline void axpy_float_rows(int n_rows, const float* c, float* y, int64_t n, int prefetch_bytes,
                            Load load) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 a0 = _mm256_loadu_ps(y + i), a1 = _mm256_loadu_ps(y + i + 8);
    __m256 a2 = _mm256_loadu_ps(y + i + 16), a3 = _mm256_loadu_ps(y + i + 24);
    for (int r = 0; r < n_rows; ++r) {
      const __m256 cv = _mm256_set1_ps(c[r]);
      a0 = _mm256_fmadd_ps(cv, load(r, i, prefetch_bytes), a0);
      a1 = _mm256_fmadd_ps(cv, load(r, i + 8, 0), a1);
      a2 = _mm256_fmadd_ps(cv, load(r, i + 16, 0), a2);
      a3 = _mm256_fmadd_ps(cv, load(r, i + 24, 0), a3);
    }
    _mm256_storeu_ps(y + i, a0);
    _mm256_storeu_ps(y + i + 8, a1);
    _mm256_storeu_ps(y + i + 16, a2);
    _mm256_storeu_ps(y + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(y + i);
    for (int r = 0; r < n_rows; ++r) a = _mm256_fmadd_ps(_mm256_set1_ps(c[r]), load(r, i, 0), a);
    _mm256_storeu_ps(y + i, a);
  }
  for (; i < n; ++i) {
    float a = y[i];
    for (int r = 0; r < n_rows; ++r) a = std::fma(c[r], _mm256_cvtss_f32(load(r, i, -1)), a);
    y[i] = a;
  }
}

void axpy_f32(const float* const* w, const float* c, int n_rows, float* y, int64_t n) {
  axpy_float_rows(n_rows, c, y, n, kPrefetchFloat, [&](int r, int64_t i, int pf) {
    if (pf > 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + pf, _MM_HINT_T0);
    if (pf < 0) return _mm256_set1_ps(w[r][i]);
    return _mm256_loadu_ps(w[r] + i);
  });
}

void axpy_f16(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n) {
  axpy_float_rows(n_rows, c, y, n, kPrefetchFloat, [&](int r, int64_t i, int pf) {
    if (pf > 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + pf, _MM_HINT_T0);
    if (pf < 0) return _mm256_set1_ps(half_to_float(w[r][i]));
    return load_f16(w[r] + i);
  });
}

void axpy_bf16(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n) {
  axpy_float_rows(n_rows, c, y, n, kPrefetchFloat, [&](int r, int64_t i, int pf) {
    if (pf > 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + pf, _MM_HINT_T0);
    if (pf < 0) {
      const uint32_t bits = uint32_t{w[r][i]} << 16;
      float f;
      __builtin_memcpy(&f, &bits, 4);
      return _mm256_set1_ps(f);
    }
    return load_bf16(w[r] + i);
  });
}

// A block's 32 quants as int8 in element order, in two halves of 16.
inline void block_int8(const BlockQ8_0& blk, __m128i& lo, __m128i& hi) {
  lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
  hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16));
}
inline void block_int8(const BlockQ4_0& blk, __m128i& lo, __m128i& hi) {
  const __m128i low_nibbles = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
  lo = _mm_sub_epi8(_mm_and_si128(raw, low_nibbles), eight);
  hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), low_nibbles), eight);
}

#if defined(STRATA_KERNELS_VNNI)
// 32 output floats in two 512-bit registers. With AVX-512 the int8 -> int32 widening (the
// port-5 shuffle that limits the 256-bit version) handles 16 values per instruction, halving
// the shuffles per block; measured 1.6-1.9x faster than the 256-bit loop (BM_SparseOp). Same
// order of additions per element.
struct Chunk32 {
  __m512 a0, a1;
  explicit Chunk32(const float* y) : a0(_mm512_loadu_ps(y)), a1(_mm512_loadu_ps(y + 16)) {}
  void add(__m128i lo, __m128i hi, float s) {
    const __m512 sv = _mm512_set1_ps(s);
    a0 = _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), a0);
    a1 = _mm512_fmadd_ps(sv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), a1);
  }
  void store(float* y) const {
    _mm512_storeu_ps(y, a0);
    _mm512_storeu_ps(y + 16, a1);
  }
};
#else
// 32 output floats in four 256-bit registers.
struct Chunk32 {
  __m256 a[4];
  explicit Chunk32(const float* y) {
    for (int g = 0; g < 4; ++g) a[g] = _mm256_loadu_ps(y + 8 * g);
  }
  void add(__m128i lo, __m128i hi, float s) {
    const __m256 sv = _mm256_set1_ps(s);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int g = 0; g < 4; ++g)
      a[g] = _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[g])), a[g]);
  }
  void store(float* y) const {
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(y + 8 * g, a[g]);
  }
};
#endif

// Quantized rows: per 32-element block, every row's quants scaled by c[r] * d added in order.
template <class Block>
inline void axpy_quantized(const Block* const* w, const float* c, int n_rows, float* y, int64_t n,
                           int prefetch_distance) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    float* yb = y + b * kQK;
    Chunk32 acc(yb);
    for (int r = 0; r < n_rows; ++r) {
      const Block& blk = w[r][b];
      prefetch_ahead(&blk, prefetch_distance, 1);
      __m128i lo, hi;
      block_int8(blk, lo, hi);
      acc.add(lo, hi, c[r] * half_to_float(blk.d));
    }
    acc.store(yb);
  }
}

void axpy_q8_0(const BlockQ8_0* const* w, const float* c, int n_rows, float* y, int64_t n) {
  axpy_quantized(w, c, n_rows, y, n, kPrefetchQ8);
}

void axpy_q4_0(const BlockQ4_0* const* w, const float* c, int n_rows, float* y, int64_t n) {
  axpy_quantized(w, c, n_rows, y, n, kPrefetchQ4);
}

// One table per compilation of this file (see kernels_avx2_vnni.cpp).
#if defined(STRATA_KERNELS_VNNI)
constexpr const char* kTableName = "avx512vnni";
#else
constexpr const char* kTableName = "avx2";
#endif
const CpuKernels kTable{.name = kTableName,
                        .dot_f32 = dot_f32<>,
                        .dot_f16 = dot_f16<>,
                        .dot_bf16 = dot_bf16<>,
                        .dot_q8_0 = dot_q8_0<>,
                        .dot_q4_0 = dot_q4_0<>,
                        .gather_dot_f32 = dot_f32<0>,
                        .gather_dot_f16 = dot_f16<0>,
                        .gather_dot_bf16 = dot_bf16<0>,
                        .gather_dot_q8_0 = dot_q8_0<0>,
                        .gather_dot_q4_0 = dot_q4_0<0>,
                        .dot_f32_tile = dot_f32_tile,
                        .dot_f16_tile = dot_f16_tile,
                        .dot_bf16_tile = dot_bf16_tile,
                        .matvec_q4_0x16 = matvec_q4_0x16,
                        .matvec_q8_0x16 = matvec_q8_0x16,
                        .quantize_q8_0 = quantize_q8_0,
                        .axpy_f32 = axpy_f32,
                        .axpy_f16 = axpy_f16,
                        .axpy_bf16 = axpy_bf16,
                        .axpy_q8_0 = axpy_q8_0,
                        .axpy_q4_0 = axpy_q4_0};
}  // namespace
#if defined(STRATA_KERNELS_VNNI)
const CpuKernels* avx512vnni_kernels_unchecked() {
  return &kTable;
}
#else
const CpuKernels* avx2_kernels_unchecked() {
  return &kTable;
}
#endif

}  // namespace strata

#else  // not x86-64: no SIMD tables
namespace strata {
#if defined(STRATA_KERNELS_VNNI)
const CpuKernels* avx512vnni_kernels_unchecked() {
  return nullptr;
}
#else
const CpuKernels* avx2_kernels_unchecked() {
  return nullptr;
}
#endif
}  // namespace strata
#endif
