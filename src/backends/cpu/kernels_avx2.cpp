// AVX2 + FMA + F16C kernels. This file is compiled with -mavx2 -mfma -mf16c and must only be
// entered after dispatch.cpp has checked the CPU; it uses no inline functions shared with other
// translation units, so no AVX2 code can leak into the baseline build.
//
// kernels_avx2_vnni.cpp compiles this same file a second time with STRATA_KERNELS_VNNI set and
// AVX-512 VL/VNNI enabled: the int8 products then use vpdpbusd on 256-bit registers (one
// instruction for maddubs + madd), which matters because these loops are bound by the vector
// ALU ports. 512-bit registers were measured slower: they leave only two ALU ports.
#include "backends/cpu/attention_exp.h"
#include "backends/cpu/kernels.h"
#include "tensor/column_groups.h"
#include "tensor/half_table.h"
#include "tensor/interleaved_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#if defined(STRATA_KERNELS_VNNI)
#include "backends/cpu/transpose_avx512.h"
#endif

namespace strata {

namespace {

// Weights stream from RAM once per token; the hardware prefetcher alone leaves the loops
// waiting on memory. Each loop iteration asks for the cache lines `distance` bytes ahead of
// what it reads, spread evenly through the computation (prefetches past the end are harmless).
// Distances per type were tuned with `strata bench` on 1B models (2 threads, huge pages),
// re-measured in session 2 (decode tok/s, medians of 3): F16 1024: 13.8, 4096: 15.4, 8192:
// 14.9; Q8_0 512: 24.0, 1024: 25.6, 2048: 22.3; Q4_0 1024: 38.8, 4096: 41.5, 16384: 39.4.
// Interleaved Q4_0 (session 3, 3 alternating rounds): 1024: 42.6/41.4/40.4, 2048: 43.2/42.4/
// 43.1, 4096: 38.9/38.0/38.6. Session 6: the interleaved kernels also request each line into
// L2 4 KiB ahead, and into L1 1 KiB ahead: enough lines in flight without holding L1 miss
// buffers for the whole trip (BM_MatVec/T/1/2/2/1, 3 alternating runs, GB/s: Q4_0x16 23.9-24.3
// with L1 at 2 KiB only, 25.6-26.7 with L1 1 KiB + L2 4 KiB, 25.8-26.7 with L2 3 KiB, 23.6-24.5
// with L2 6 KiB; Q8_0x16 25.7-26.9 -> 26.6-27.4).
constexpr int kPrefetchFloat = 4096, kPrefetchQ8 = 1024, kPrefetchQ4 = 4096;
constexpr int kPrefetchQ4x16 = 1024, kPrefetchQ8x16 = 1024;
constexpr int kPrefetchL2Q4x16 = 4096, kPrefetchL2Q8x16 = 4096;
inline void prefetch_ahead(const void* p, int distance, int lines) {
  const char* c = static_cast<const char*>(p) + distance;
  for (int i = 0; i < lines; ++i) _mm_prefetch(c + 64 * i, _MM_HINT_T0);
}
// The float dot kernels prefetch into L2 only: each core has few L1 miss buffers and L1
// prefetches hold them for the whole trip to RAM, which capped the F16 matrix-vector product at
// 20 GB/s on 2 threads; into L2 it reached 26 GB/s (BM_MatVec F16 512MiB, session 3). The
// quantized kernels measured the same or slower this way (Q4_0 22 -> 19 GB/s) and keep L1;
// the interleaved ones use both (above).
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
// next (gathered rows only, may be null): the caller's next row, whose lines are requested as
// this row's are consumed (an L2 prefetch per line) instead of all at once by the caller.
inline void request_next(const void* next, int64_t byte_offset, int lines) {
  const char* p = static_cast<const char*>(next) + byte_offset;
  for (int l = 0; l < lines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T1);
}

template <int D = kPrefetchFloat>
float dot_f32(const float* w, const float* x, int64_t n, const void* next = nullptr) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 2);
    if (next != nullptr) request_next(next, 4 * i, 2);
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
float dot_f16(const uint16_t* w, const float* x, int64_t n, const void* next = nullptr) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 1);
    if (next != nullptr) request_next(next, 2 * i, 1);
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
float dot_bf16(const uint16_t* w, const float* x, int64_t n, const void* next = nullptr) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (D > 0) prefetch_ahead_l2(w + i, D, 1);
    if (next != nullptr) request_next(next, 2 * i, 1);
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
                               Block block, const void* next = nullptr) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    if (distance > 0)
      prefetch_ahead(static_cast<const char*>(w) + b * block_bytes, distance,
                     (4 * block_bytes + 63) / 64);
    if (next != nullptr) request_next(next, b * block_bytes, (4 * block_bytes + 63) / 64);
    acc[0] = block(b, acc[0]);
    acc[1] = block(b + 1, acc[1]);
    acc[2] = block(b + 2, acc[2]);
    acc[3] = block(b + 3, acc[3]);
  }
  for (; b < nb; ++b) acc[0] = block(b, acc[0]);
  return _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
}

template <typename Block>
inline float sum_blocks(const void* w, int block_bytes, int distance, int64_t nb, Block block,
                        const void* next = nullptr) {
  return hsum(sum_blocks_lanes(w, block_bytes, distance, nb, block, next));
}

// Scales are broadcast straight from memory (the f16 table, the activation's f32 scales): pure
// loads, keeping the shuffle port free; converting f16 per block was the bottleneck.
template <int D = kPrefetchQ8>
float dot_q8_0(const BlockQ8_0* w, const Q8Activation& x, int64_t n, const void* next = nullptr) {
  const float* f16 = f16_to_f32_table();
  return sum_blocks(
      w, sizeof(BlockQ8_0), D, n / 32,
      [&](int64_t b, __m256 acc) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.blocks[b].qs));
        const __m256 p = _mm256_mul_ps(int8_dot_as_float(wq, xq), _mm256_broadcast_ss(&x.scale[b]));
        return _mm256_fmadd_ps(p, _mm256_broadcast_ss(&f16[w[b].d]), acc);
      },
      next);
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

#include "backends/cpu/kernels_avx512_q4.inc"
#else
// sum((q - 8) x) = sum(q x) - 8 sum(x): q is unsigned, so maddubs takes it directly; the second
// term is spread over the 8 lanes as scale * sum(x) each (Q8Activation::scaled_sum).
template <int D = kPrefetchQ4>
float dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n, const void* next = nullptr) {
  const float* f16 = f16_to_f32_table();
  return sum_blocks(
      w, sizeof(BlockQ4_0), D, n / 32,
      [&](int64_t b, __m256 acc) {
        const __m256i q = unpack_q4_unsigned(w[b].qs);
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.blocks[b].qs));
        const __m256 p = _mm256_cvtepi32_ps(unsigned_by_signed_dot(q, xq));
        const __m256 t = _mm256_fmsub_ps(p, _mm256_broadcast_ss(&x.scale[b]),
                                         _mm256_broadcast_ss(&x.scaled_sum[b]));
        return _mm256_fmadd_ps(t, _mm256_broadcast_ss(&f16[w[b].d]), acc);
      },
      next);
}
#endif

#if !defined(STRATA_KERNELS_VNNI)
void gather_dot4_q4_0(const BlockQ4_0* const* w, const Q8Activation& x, int64_t n, float* out,
                      const void* const* next, int n_next) {
  for (int r = 0; r < n_next; ++r)
    for (int64_t off = 0; off < n / 32 * static_cast<int64_t>(sizeof(BlockQ4_0)); off += 64)
      _mm_prefetch(static_cast<const char*>(next[r]) + off, _MM_HINT_T1);
  for (int r = 0; r < 4; ++r) out[r] = dot_q4_0<0>(w[r], x, n);
}
#endif

#include "backends/cpu/kernels_avx2_interleaved.inc"

// Same arithmetic as the scalar quantizer (quantize_row_q8_0_activations: x * (127 / max|x|)
// rounded half to even, llama.cpp's), so both produce identical blocks.
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
    const float amax_s = _mm_cvtss_f32(m);
    const float id = amax_s != 0.0f ? 127.0f / amax_s : 0.0f;
    dst[b].d = _cvtss_sh(amax_s / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    const __m256 scale = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_mul_ps(v[k], scale);
      q[k] = _mm256_cvtps_epi32(
          _mm256_round_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    // packs interleave 128-bit lanes; restore element order.
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs), p);
  }
}

#include "backends/cpu/kernels_avx2_axpy.inc"
#include "backends/cpu/kernels_avx2_column_groups.inc"
#include "backends/cpu/kernels_avx2_kquants.inc"
#include "backends/cpu/kernels_avx2_q4k_groups.inc"
#include "backends/cpu/kernels_avx2_q6k_rows.inc"
#include "backends/cpu/kernels_avx2_peaks.inc"
#include "backends/cpu/kernels_avx2_tiles.inc"
#include "backends/cpu/kernels_avx2_attention.inc"
#include "backends/cpu/kernels_avx2_units.inc"
#include "backends/cpu/kernels_avx2_unit_groups.inc"

// One table per compilation of this file (see kernels_avx2_vnni.cpp).
#if defined(STRATA_KERNELS_VNNI)
constexpr const char* kTableName = "avx512vnni";
#else
constexpr const char* kTableName = "avx2";
#endif
// The table's entries: dense rows prefetch ahead inside the row (D > 0); gathered rows do not,
// and request the caller's next row instead. Q4_0 single rows: two blocks per 512-bit register
// where AVX-512 is there.
float dense_dot_f32(const float* w, const float* x, int64_t n) {
  return dot_f32<>(w, x, n);
}
float dense_dot_f16(const uint16_t* w, const float* x, int64_t n) {
  return dot_f16<>(w, x, n);
}
float dense_dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return dot_bf16<>(w, x, n);
}
float dense_dot_q8_0(const BlockQ8_0* w, const Q8Activation& x, int64_t n) {
  return dot_q8_0<>(w, x, n);
}
float gathered_dot_f32(const float* w, const float* x, int64_t n, const void* next) {
  return dot_f32<0>(w, x, n, next);
}
float gathered_dot_f16(const uint16_t* w, const float* x, int64_t n, const void* next) {
  return dot_f16<0>(w, x, n, next);
}
float gathered_dot_bf16(const uint16_t* w, const float* x, int64_t n, const void* next) {
  return dot_bf16<0>(w, x, n, next);
}
float gathered_dot_q8_0(const BlockQ8_0* w, const Q8Activation& x, int64_t n, const void* next) {
  return dot_q8_0<0>(w, x, n, next);
}
#if defined(STRATA_KERNELS_VNNI)
constexpr auto kDotQ4 = dot_q4_0_512<>;
float gathered_dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n, const void* next) {
  float out;
  dot_q4_0_512_rows<1, 0>(&w, x, n, &out, &next, next != nullptr ? 1 : 0);
  return out;
}
#else
float dense_dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n) {
  return dot_q4_0<>(w, x, n);
}
constexpr auto kDotQ4 = dense_dot_q4_0;
float gathered_dot_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n, const void* next) {
  return dot_q4_0<0>(w, x, n, next);
}
#endif
const CpuKernels kTable = with_unit_kernels(CpuKernels{
    .name = kTableName,
    .dot_f32 = dense_dot_f32,
    .dot_f16 = dense_dot_f16,
    .dot_bf16 = dense_dot_bf16,
    .dot_q8_0 = dense_dot_q8_0,
    .dot_q4_0 = kDotQ4,
    .gather_dot_f32 = gathered_dot_f32,
    .gather_dot_f16 = gathered_dot_f16,
    .gather_dot_bf16 = gathered_dot_bf16,
    .gather_dot_q8_0 = gathered_dot_q8_0,
    .gather_dot_q4_0 = gathered_dot_q4_0,
    .gather_dot4_q4_0 = gather_dot4_q4_0,
    .dot_f32_tile = dot_f32_tile,
    .dot_f16_tile = dot_f16_tile,
    .dot_bf16_tile = dot_bf16_tile,
    .token_lanes = kTileLanes,
    .dot_float_lanes = dot_float_lanes,
    .matvec_q4_0x16 = matvec_q4_0x16,
    .matvec_q8_0x16 = matvec_q8_0x16,
    .matmat_q4_0x16 = matmat_q4_0x16,
    .matmat_q8_0x16 = matmat_q8_0x16,
    .int8_peak_loop = int8_peak_loop,
    .f32_peak_loop = f32_peak_loop,
    .attend_panel = attend_panel,
    .load_panel = load_panel,
    .quantize_q8_0 = quantize_q8_0,
    .axpy_f32 = axpy_f32<ColumnReadAhead::Far>,
    .axpy_f16 = axpy_f16<ColumnReadAhead::Far>,
    .axpy_bf16 = axpy_bf16<ColumnReadAhead::Far>,
    .axpy_q8_0 = axpy_q8_0,
    .axpy_q4_0 = axpy_q4_0,
    .axpy_q8_0_group = axpy_q8_0_group<ColumnReadAhead::Far>,
    .axpy_q4_0_group = axpy_q4_0_group<ColumnReadAhead::Far>,
    .axpy_q4_K_super = axpy_k_super<BlockQ4_K, Q4ColumnRows>,
    .axpy_q5_K_super = axpy_k_super<BlockQ5_K, Q5ColumnRows>,
    .axpy_q6_K_super = axpy_k_super<BlockQ6_K, Q6ColumnRows>,
    .axpy_q2_K_super = axpy_k_super<BlockQ2_K, Q2ColumnRows>,
    .axpy_q3_K_super = axpy_k_super<BlockQ3_K, Q3ColumnRows>,
    .dot_kq = {dense_dot_kquant<BlockQ2_K>, dense_dot_kquant<BlockQ3_K>,
               dense_dot_kquant<BlockQ4_K>, dense_dot_kquant<BlockQ5_K>,
               dense_dot_kquant<BlockQ6_K>},
    .gather_dot_kq = {gathered_dot_kquant<BlockQ2_K>, gathered_dot_kquant<BlockQ3_K>,
                      gathered_dot_kquant<BlockQ4_K>, gathered_dot_kquant<BlockQ5_K>,
                      gathered_dot_kquant<BlockQ6_K>},
    .dot_kq_multi = {dot_kquant_multi<BlockQ2_K>, dot_kquant_multi<BlockQ3_K>,
                     dot_kquant_multi<BlockQ4_K>, dot_kquant_multi<BlockQ5_K>,
                     dot_kquant_multi<BlockQ6_K>},
    .matvec_q4_Kx16 = matvec_q4_Kx16,
    .matmat_q4_Kx16 = matmat_q4_Kx16,
    .matmat_q6_K_rows16 = matmat_q6_K_rows16,
    .axpy_kq = {axpy_kquant<BlockQ2_K>, axpy_kquant<BlockQ3_K>, axpy_kquant<BlockQ4_K>,
                axpy_kquant<BlockQ5_K>, axpy_kquant<BlockQ6_K>},
    .dot_unit = {},
    .gather_dot_unit = {},
    .dot_unit_multi = {},
    .axpy_unit = {},
    .matvec_unit_x16 = {},
    .matmat_unit_x16 = {}},
    std::make_index_sequence<kUnitTypes>());

// The same table with the Near read-ahead's column products.
CpuKernels near_table(CpuKernels t) {
  t.read_ahead = ColumnReadAhead::Near;
  t.axpy_f32 = axpy_f32<ColumnReadAhead::Near>;
  t.axpy_f16 = axpy_f16<ColumnReadAhead::Near>;
  t.axpy_bf16 = axpy_bf16<ColumnReadAhead::Near>;
  t.axpy_q8_0_group = axpy_q8_0_group<ColumnReadAhead::Near>;
  t.axpy_q4_0_group = axpy_q4_0_group<ColumnReadAhead::Near>;
  return t;
}
const CpuKernels kNearTable = near_table(kTable);

const CpuKernels* table(ColumnReadAhead r) {
  return r == ColumnReadAhead::Near ? &kNearTable : &kTable;
}
}  // namespace
#if defined(STRATA_KERNELS_VNNI)
const CpuKernels* avx512vnni_kernels_unchecked(ColumnReadAhead r) {
  return table(r);
}
#else
const CpuKernels* avx2_kernels_unchecked(ColumnReadAhead r) {
  return table(r);
}
#endif

}  // namespace strata

#else  // not x86-64: no SIMD tables
namespace strata {
#if defined(STRATA_KERNELS_VNNI)
const CpuKernels* avx512vnni_kernels_unchecked(ColumnReadAhead) {
  return nullptr;
}
#else
const CpuKernels* avx2_kernels_unchecked(ColumnReadAhead) {
  return nullptr;
}
#endif
}  // namespace strata
#endif
