// Compiled with -mamx-tile -mamx-bf16 -mavx512f -mavx512bw -mavx512vl -mf16c; entered only after
// amx_bf16_available(). F16 weights on AMX-BF16 tiles (amx_matmat.h): tile A holds 16 weight
// rows x 32 values (a block of 16 rows converted and split whole, then multiplied by every token
// block), tile B 16 value pairs x 16 tokens (the activations, split and packed once per product),
// tile C 16 rows x 16 tokens.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "core/error.h"

#if defined(__x86_64__) && defined(__AMX_BF16__)
#include <immintrin.h>

#include "backends/cpu/transpose_avx512.h"
#define STRATA_HAVE_AMX_BF16 1
#endif

namespace strata {

#if STRATA_HAVE_AMX_BF16

namespace {

constexpr int kTile = 16;  // rows of every tile: weight rows (A, C), value pairs (B)
constexpr int kStep = 32;  // values along a row per tile product

// tmm0-3: C (block_pair); tmm4, tmm5: A hi and lo; tmm6, tmm7: B. All 16 rows x 64 bytes.
void configure_tiles() {
  if (amx_thread_tiles() == AmxTiles::Bf16) return;
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = kTile, c.colsb[t] = 64;
  load_tile_config(c);
  amx_thread_tiles() = AmxTiles::Bf16;
}

// Finite floats to BF16, rounded to nearest even, in the low half of each 32-bit lane.
inline __m512i bf16_bits(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)),
                           16);
}

inline __m512 bf16_value(__m512i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

// 32 activations (a: 0-15, b: 16-31) as their three BF16 parts, each 32 halves in value order
// (16 lanes of value pairs): hi = bf16(x), lo = bf16(x - hi) (x - hi is exact in F32), rest =
// bf16(x - hi - lo), exact: hi + lo + rest is x (8 significant bits a part).
inline __m512i halves_of(__m512i a, __m512i b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(a)),
                            _mm512_cvtepi32_epi16(b), 1);
}

inline void split_activations(__m512 a, __m512 b, __m512i& hi, __m512i& lo, __m512i& rest) {
  const __m512i ha = bf16_bits(a), hb = bf16_bits(b);
  a = _mm512_sub_ps(a, bf16_value(ha));
  b = _mm512_sub_ps(b, bf16_value(hb));
  const __m512i la = bf16_bits(a), lb = bf16_bits(b);
  hi = halves_of(ha, hb);
  lo = halves_of(la, lb);
  rest = halves_of(bf16_bits(_mm512_sub_ps(a, bf16_value(la))),
                   bf16_bits(_mm512_sub_ps(b, bf16_value(lb))));
}

// 32 values with at most 16 significant bits (F16 weights: 11) as two parts: hi is x's upper
// half, truncated, and lo = x - hi, whose few bits BF16 holds exactly; each part's 32 halves
// picked out of the floats' upper halves by one two-register permute.
inline void split_weights(__m512 a, __m512 b, __m512i& hi, __m512i& lo) {
  alignas(64) static constexpr uint16_t kUpperHalves[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i upper_halves = _mm512_load_si512(kUpperHalves);
  const __m512i top = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  const __m512i ia = _mm512_castps_si512(a), ib = _mm512_castps_si512(b);
  const __m512 la = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_and_si512(ia, top)));
  const __m512 lb = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_and_si512(ib, top)));
  hi = _mm512_permutex2var_epi16(ia, upper_halves, ib);
  lo = _mm512_permutex2var_epi16(_mm512_castps_si512(la), upper_halves, _mm512_castps_si512(lb));
}

// Values [k, k + 32) of a row of n, zeros past its end.
inline void load32(const float* x, int64_t k, int64_t n, __m512& a, __m512& b) {
  const int64_t left = n - k;
  const auto mask = [](int64_t m) {
    return m >= 16 ? __mmask16(0xffff) : m <= 0 ? __mmask16(0) : __mmask16((1u << m) - 1);
  };
  a = _mm512_maskz_loadu_ps(mask(left), x + k);
  b = _mm512_maskz_loadu_ps(mask(left - 16), x + k + 16);
}

inline void load32(const uint16_t* w, int64_t k, int64_t n, __m512& a, __m512& b) {
  const int64_t left = n - k;
  const __mmask32 m = left >= 32 ? __mmask32(0xffffffff) : __mmask32((1ull << left) - 1);
  const __m512i h = _mm512_maskz_loadu_epi16(m, w + k);
  a = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}

// Tiles A of 16 rows at every step, hi and lo: step s's 16 rows x 32 halves at s * 512 (rows
// past n_rows zero). The rows are read one after the other as one stream, requested
// kPrefetchSteps steps ahead (a row is a few KiB: the hardware prefetcher would start over on
// every one).
void weight_tiles(const MatrixView& w, int64_t r0, int n_rows, int64_t steps, uint16_t* hi,
                  uint16_t* lo) {
  constexpr int64_t kPrefetchSteps = 16;
  for (int i = 0; i < n_rows; ++i) {
    const auto* row = reinterpret_cast<const uint16_t*>(w.row(r0 + i));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t ahead = s + kPrefetchSteps;
      if (ahead < steps)
        _mm_prefetch(reinterpret_cast<const char*>(row + ahead * kStep), _MM_HINT_T0);
      else if (i + 1 < n_rows)
        _mm_prefetch(reinterpret_cast<const char*>(w.row(r0 + i + 1)) + (ahead - steps) * 64,
                     _MM_HINT_T0);
      __m512i h, l;
      __m512 a, b;
      load32(row, s * kStep, w.cols, a, b);
      split_weights(a, b, h, l);
      _mm512_store_si512(hi + (s * kTile + i) * kStep, h);
      _mm512_store_si512(lo + (s * kTile + i) * kStep, l);
    }
  }
  for (int i = n_rows; i < kTile; ++i)
    for (int64_t s = 0; s < steps; ++s) {
      _mm512_store_si512(hi + (s * kTile + i) * kStep, _mm512_setzero_si512());
      _mm512_store_si512(lo + (s * kTile + i) * kStep, _mm512_setzero_si512());
    }
}

// Token blocks b and b + 1 (when `two`) times the 16 rows' tiles over the whole row, the sums
// stored to `acc` (four tiles of 16 x 16: the products of the weights' hi part for each block,
// then of their lo part). Kept in tmm0-3 meanwhile, so consecutive tile products write different
// accumulators (a product waits for the last one into its accumulator); tmm6/tmm7 hold the
// blocks' activation parts.
void block_pair(const uint16_t* a_hi, const uint16_t* a_lo, const AmxBf16Activations& x,
                int64_t b, bool two, float* acc) {
  constexpr int kC = kTile * kTile;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < x.steps(); ++s) {
    _tile_loadd(4, a_hi + s * kTile * kStep, 64);
    _tile_loadd(5, a_lo + s * kTile * kStep, 64);
    for (int part = 0; part < kActivationParts; ++part) {
      _tile_loadd(6, x.tile(b, s, part), 64);
      if (two) _tile_loadd(7, x.tile(b + 1, s, part), 64);
      _tile_dpbf16ps(0, 4, 6);
      if (two) _tile_dpbf16ps(1, 4, 7);
      if (part + 1 < kActivationParts) {  // the last part times the weights' lo: under 2^-24
        _tile_dpbf16ps(2, 5, 6);
        if (two) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, acc, 64);
  _tile_stored(1, acc + kC, 64);
  _tile_stored(2, acc + 2 * kC, 64);
  _tile_stored(3, acc + 3 * kC, 64);
}

// A block pair's sums (block_pair's `acc`) to y: hi plus lo, rows x tokens turned into each
// token's rows side by side.
void store_pair(const float* acc, int64_t b, bool two, int64_t tokens, int64_t r0, int n_rows,
                float* y, int64_t y_stride) {
  constexpr int kC = kTile * kTile;
  for (int k = 0; k < (two ? 2 : 1); ++k) {
    __m512i v[kTile];
    for (int i = 0; i < kTile; ++i)
      v[i] = _mm512_castps_si512(_mm512_add_ps(_mm512_load_ps(acc + k * kC + i * kTile),
                                               _mm512_load_ps(acc + (2 + k) * kC + i * kTile)));
    transpose_16x16(v);
    const auto rows = static_cast<__mmask16>((1u << n_rows) - 1);
    const int64_t t0 = (b + k) * kTile;
    for (int n = 0; n < kTile && t0 + n < tokens; ++n)
      _mm512_mask_storeu_ps(y + (t0 + n) * y_stride + r0, rows, _mm512_castsi512_ps(v[n]));
  }
}

}  // namespace

bool amx_bf16_available() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("amx-bf16") && amx_available();
  }();
  return ok;
}

void AmxBf16Activations::prepare(std::span<const float* const> x, int64_t cols) {
  tokens_ = static_cast<int64_t>(x.size());
  if (tokens_ > kAmxBf16MaxTokens)
    fail("AMX-BF16 products take at most {} tokens per call", kAmxBf16MaxTokens);
  steps_ = (cols + kStep - 1) / kStep;
  const int64_t blocks = (tokens_ + kTile - 1) / kTile;
  packed_.resize(static_cast<size_t>(blocks * steps_ * kActivationParts * kTile));
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t s = 0; s < steps_; ++s) {
      // Each token's 32 values as 16 lanes of pairs, then transposed: B row p = pair p of the
      // block's 16 tokens.
      __m512i part[kActivationParts][kTile];
      for (int n = 0; n < kTile; ++n) {
        const int64_t t = block * kTile + n;
        for (auto& p : part) p[n] = _mm512_setzero_si512();
        if (t < tokens_) {
          __m512 a, b;
          load32(x[static_cast<size_t>(t)], s * kStep, cols, a, b);
          split_activations(a, b, part[0][n], part[1][n], part[2][n]);
        }
      }
      uint16_t* out = packed_.data()->halves +
                      static_cast<size_t>((block * steps_ + s) * kActivationParts * 512);
      for (int i = 0; i < kActivationParts; ++i) {
        transpose_16x16(part[i]);
        for (int p = 0; p < kTile; ++p) _mm512_storeu_si512(out + i * 512 + p * 2 * kTile, part[i][p]);
      }
    }
}

void amx_matmat_f16(const MatrixView& w, int64_t row_begin, int64_t row_end,
                    const AmxBf16Activations& x, float* y, int64_t y_stride) {
  if (w.type != DType::F16) fail("AMX-BF16 products take F16 weights, not {}", dtype_name(w.type));
  configure_tiles();
  // Each block of 16 rows is converted whole (its tiles stay in L2) and then multiplied by every
  // pair of token blocks. (Cutting the rows into chunks so a chunk of the activations stays in
  // L2 for several row blocks measured slower: 111 against 140 tok/s, 1B F16 pp512.)
  constexpr int64_t kC = kTile * kTile;
  const int64_t blocks = (x.tokens() + kTile - 1) / kTile;
  struct alignas(64) TileRow {
    uint16_t v[kStep];
  };
  thread_local std::vector<TileRow> a_tiles;  // hi then lo
  a_tiles.resize(static_cast<size_t>(x.steps() * 2 * kTile));
  uint16_t* a_hi = a_tiles.data()->v;
  uint16_t* a_lo = a_hi + x.steps() * kTile * kStep;
  alignas(64) float acc[4 * kC];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTile) {
    const int n_rows = static_cast<int>(std::min<int64_t>(kTile, row_end - r0));
    weight_tiles(w, r0, n_rows, x.steps(), a_hi, a_lo);
    for (int64_t b = 0; b < blocks; b += 2) {
      block_pair(a_hi, a_lo, x, b, b + 1 < blocks, acc);
      store_pair(acc, b, b + 1 < blocks, x.tokens(), r0, n_rows, y, y_stride);
    }
  }
}

uint64_t amx_bf16_peak_loop(int64_t iterations) {
  // Four C tiles from one A and one B tile: four independent tile products per round.
  configure_tiles();
  alignas(64) uint16_t operand[kTile * kStep];
  std::fill(operand, operand + kTile * kStep, uint16_t{0x3f80});  // 1.0
  alignas(64) float out[kTile * kTile];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(6, operand, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 6);
    _tile_dpbf16ps(2, 4, 6);
    _tile_dpbf16ps(3, 4, 6);
  }
  _tile_stored(0, out, 64);
  volatile float sink = out[0];
  (void)sink;
  return static_cast<uint64_t>(iterations) * 4 * kTile * kTile * kStep;
}

#else

uint64_t amx_bf16_peak_loop(int64_t) {
  fail("this build has no AMX-BF16 kernels");
}

bool amx_bf16_available() {
  return false;
}

void AmxBf16Activations::prepare(std::span<const float* const>, int64_t) {
  fail("this build has no AMX-BF16 kernels");
}

void amx_matmat_f16(const MatrixView&, int64_t, int64_t, const AmxBf16Activations&, float*,
                    int64_t) {
  fail("this build has no AMX-BF16 kernels");
}

#endif

}  // namespace strata
