// Compiled with -mamx-tile -mamx-int8 -mavx512f -mavx512bw -mavx512vl -ffp-contract=off; entered
// only after amx_available() checked the CPU and obtained the tile permission.
#include "backends/cpu/amx_matmat.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"

#if defined(__x86_64__) && defined(__AMX_INT8__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define STRATA_HAVE_AMX 1
#endif

namespace strata {

#if STRATA_HAVE_AMX

namespace {

constexpr int kRows = 16;    // weight rows per tile
constexpr int kTokens = 16;  // tokens per tile

// tmm0: C, 16 rows x 16 int32; tmm1: A, 16 weight rows x 32 int8 (one block);
// tmm2: B, 8 rows x 64 bytes (32 values x 16 tokens, four consecutive values per token).
void configure_tiles() {
  if (amx_thread_tiles() == AmxTiles::Int8) return;
  AmxTileConfig c;
  c.rows[0] = kRows, c.colsb[0] = kTokens * 4;
  c.rows[1] = kRows, c.colsb[1] = kQK;
  c.rows[2] = kQK / 4, c.colsb[2] = kTokens * 4;
  c.rows[3] = kRows, c.colsb[3] = kTokens * 4;  // tmm3, tmm4: C and B of a second token group
  c.rows[4] = kQK / 4, c.colsb[4] = kTokens * 4;
  c.rows[5] = kTokens, c.colsb[5] = kQK;  // interleaved Q4_0: tmm1, tmm5 = two token groups
  load_tile_config(c);
  amx_thread_tiles() = AmxTiles::Int8;
}

// Interleaved rows (tensor/interleaved_rows.h): the weights are tile B as they lie -- a chunk of
// four quants of each of 16 rows is one B row in the tile's four-values-per-column format --
// Q8_0 straight from memory, Q4_0 once its nibbles are split and offset by 8. The activations are
// tile A (16 tokens x 32 values). Tile C is tokens x rows, so each token's 16 results are one
// vector.
void amx_matmat_interleaved(const MatrixView& w, int64_t row_begin, int64_t row_end,
                            std::span<const Q8Activation> x, float* y, int64_t y_stride) {
  const int64_t nb = w.cols / kQK, n_tokens = static_cast<int64_t>(x.size());
  const int64_t n_groups = (n_tokens + kTokens - 1) / kTokens;
  thread_local std::vector<int8_t> packed;
  thread_local std::vector<float> scales;
  packed.assign(static_cast<size_t>(n_groups * nb * kTokens * kQK), 0);
  scales.assign(static_cast<size_t>(n_groups * nb * kTokens), 0.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const Q8Activation& xt = x[static_cast<size_t>(t)];
    const int64_t g = t / kTokens, n = t % kTokens;
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(packed.data() + ((g * nb + b) * kTokens + n) * kQK, xt.blocks[b].qs, kQK);
      scales[static_cast<size_t>((g * nb + b) * kTokens + n)] = xt.scale[b];
    }
  }
  const uint64_t group_bytes = interleaved_group_bytes(w.type, w.cols);
  const bool q8 = w.type == DType::Q8_0;
  const __m512i low = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  alignas(64) int8_t bt[kQK / 4][64];
  alignas(64) int32_t c[2][kTokens][kRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
    const uint8_t* group = w.data + static_cast<uint64_t>(r0 / kRows) * group_bytes;
    const uint16_t* d = interleaved_scales(group);
    const uint8_t* q = interleaved_quants(group, nb);
    __m512 acc[2][kTokens];
    for (auto& g : acc)
      for (auto& v : g) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      if (q8) {
        _tile_loadd(2, q + b * 8 * 64, 64);
      } else {
        for (int j = 0; j < 4; ++j) {
          const __m512i v = _mm512_loadu_si512(q + (b * 4 + j) * 64);
          _mm512_store_si512(bt[j], _mm512_sub_epi8(_mm512_and_si512(v, low), eight));
          _mm512_store_si512(
              bt[4 + j], _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), eight));
        }
        _tile_loadd(2, bt, 64);
      }
      _tile_zero(0);
      _tile_loadd(1, packed.data() + b * kTokens * kQK, kQK);
      _tile_dpbssd(0, 1, 2);
      _tile_stored(0, c[0], kRows * 4);
      if (n_groups > 1) {
        _tile_zero(3);
        _tile_loadd(5, packed.data() + (nb + b) * kTokens * kQK, kQK);
        _tile_dpbssd(3, 5, 2);
        _tile_stored(3, c[1], kRows * 4);
      }
      // As the scalar kernel: sum += float(int dot) * (d_w * d_x), multiply then add.
      const __m512 dw =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + b * kRows)));
      for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t t = 0; t < kTokens; ++t) {
          const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(scales[(g * nb + b) * kTokens + t]));
          const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[g][t])), s);
          acc[g][t] = _mm512_add_ps(acc[g][t], p);
        }
    }
    for (int64_t t = 0; t < n_tokens; ++t)
      _mm512_storeu_ps(y + t * y_stride + r0, acc[t / kTokens][t % kTokens]);
  }
}

}  // namespace

AmxTiles& amx_thread_tiles() {
  thread_local AmxTiles tiles = AmxTiles::None;
  return tiles;
}

bool amx_available() {
  static const bool ok = [] {
    const char* force = std::getenv("STRATA_CPU");
    if (force != nullptr && std::string(force) != "amx" && std::string(force) != "") return false;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-int8") || !__builtin_cpu_supports("amx-tile") ||
        !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
      return false;
    constexpr long kReqPerm = 0x1023, kXtileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    return ::syscall(SYS_arch_prctl, kReqPerm, kXtileData) == 0;
  }();
  return ok;
}

void AmxInt8Activations::prepare(std::span<const Q8Activation> x, int64_t cols) {
  tokens_ = static_cast<int64_t>(x.size());
  blocks_ = cols / kQK;
  const int64_t n_groups = (tokens_ + kTokens - 1) / kTokens;
  // Padding tokens are zero.
  packed_.assign(static_cast<size_t>(n_groups * blocks_ * kQK * kTokens), 0);
  scales_.assign(static_cast<size_t>(n_groups * blocks_ * kTokens), 0.0f);
  for (int64_t t = 0; t < tokens_; ++t) {
    const Q8Activation& xt = x[static_cast<size_t>(t)];
    const int64_t g = t / kTokens, n = t % kTokens;
    for (int64_t b = 0; b < blocks_; ++b) {
      int32_t* tile = reinterpret_cast<int32_t*>(packed_.data() + (g * blocks_ + b) * kQK * kTokens);
      int32_t quad[kQK / 4];
      std::memcpy(quad, xt.blocks[b].qs, kQK);
      for (int k4 = 0; k4 < kQK / 4; ++k4) tile[k4 * kTokens + n] = quad[k4];
      scales_[static_cast<size_t>((g * blocks_ + b) * kTokens + n)] = xt.scale[b];
    }
  }
}

void amx_matmat_rows(const MatrixView& w, int64_t row_begin, int64_t row_end,
                     std::span<const Q8Activation> x, float* y, int64_t y_stride) {
  if (w.type != DType::Q8_0 && w.type != DType::Q4_0)
    fail("AMX products take Q8_0 or Q4_0 weights, not {}", dtype_name(w.type));
  if (static_cast<int64_t>(x.size()) > kAmxMaxTokens)
    fail("AMX products take at most {} tokens per call", kAmxMaxTokens);
  if (w.layout == Layout::Interleaved16) {
    if (row_begin % kRows != 0 || row_end % kRows != 0)
      fail("interleaved rows {}..{} do not start and end at groups of {}", row_begin, row_end,
           kRows);
    configure_tiles();
    amx_matmat_interleaved(w, row_begin, row_end, x, y, y_stride);
    return;
  }
  thread_local AmxInt8Activations packed;
  packed.prepare(x, w.cols);
  amx_matmat_rows(w, row_begin, row_end, packed, y, y_stride);
}

void amx_matmat_rows(const MatrixView& w, int64_t row_begin, int64_t row_end,
                     const AmxInt8Activations& x, float* y, int64_t y_stride) {
  if (w.type != DType::Q8_0 && w.type != DType::Q4_0)
    fail("AMX products take Q8_0 or Q4_0 weights, not {}", dtype_name(w.type));
  if (w.layout != Layout::Rows) fail("prepacked AMX products read rows in the file's layout");
  if (x.blocks() != w.cols / kQK) fail("activations of {} blocks for rows of {}", x.blocks(), w.cols / kQK);
  configure_tiles();
  const int64_t nb = x.blocks(), n_tokens = x.tokens();
  const int64_t all_groups = (n_tokens + kTokens - 1) / kTokens;
  const bool q8 = w.type == DType::Q8_0;
  alignas(64) int32_t c[2][kRows][kTokens];
  alignas(64) int8_t a[kRows][kQK];
  // Byte offsets of the 16 rows' block scales, for one gather per block.
  const __m512i row_offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(w.row_bytes)));
  const int block_bytes = q8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
    const int64_t nr = std::min<int64_t>(kRows, row_end - r0);
    const bool full = nr == kRows;
    const uint8_t* base = w.row(r0);
    // Two groups of 16 tokens per pass over the rows' blocks (the tile registers hold two).
    for (int64_t g0 = 0; g0 < all_groups; g0 += 2) {
      const int64_t n_groups = std::min<int64_t>(2, all_groups - g0);
      __m512 acc[2][kRows];
      for (auto& g : acc)
        for (auto& v : g) v = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk0 = base + b * block_bytes;
        // The 16 rows' scales d_w (f16) gathered and widened.
        alignas(64) float dw[kRows];
        if (full) {
          const __m512i raw = _mm512_i32gather_epi32(row_offsets, blk0, 1);
          _mm512_store_ps(dw, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
        } else {
          for (int64_t i = 0; i < kRows; ++i) {
            uint16_t d = 0;
            if (i < nr) std::memcpy(&d, blk0 + i * w.row_bytes, 2);
            dw[i] = f16_to_f32(d);
          }
        }
        // Tile A: Q8_0 values straight from the rows (stride = row bytes); Q4_0 unpacked.
        if (q8 && full) {
          _tile_loadd(1, blk0 + 2, static_cast<long>(w.row_bytes));
        } else {
          for (int64_t i = 0; i < kRows; ++i) {
            if (i >= nr) {
              std::memset(a[i], 0, kQK);
            } else if (q8) {
              std::memcpy(a[i], blk0 + i * w.row_bytes + 2, kQK);
            } else {
              const __m128i raw =
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk0 + i * w.row_bytes + 2));
              const __m128i m = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
              _mm_store_si128(reinterpret_cast<__m128i*>(a[i]),
                              _mm_sub_epi8(_mm_and_si128(raw, m), eight));
              _mm_store_si128(reinterpret_cast<__m128i*>(a[i] + 16),
                              _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m), eight));
            }
          }
          _tile_loadd(1, a, kQK);
        }
        _tile_zero(0);
        _tile_loadd(2, x.tile(g0, b), kTokens * 4);
        _tile_dpbssd(0, 1, 2);
        _tile_stored(0, c[0], kTokens * 4);
        if (n_groups > 1) {
          _tile_zero(3);
          _tile_loadd(4, x.tile(g0 + 1, b), kTokens * 4);
          _tile_dpbssd(3, 1, 4);
          _tile_stored(3, c[1], kTokens * 4);
        }
        // As the scalar kernel: sum += float(int dot) * (d_w * d_x), multiply then add.
        for (int64_t g = 0; g < n_groups; ++g) {
          const __m512 dx = _mm512_loadu_ps(x.scales(g0 + g, b));
          for (int64_t i = 0; i < kRows; ++i) {
            const __m512 s = _mm512_mul_ps(_mm512_set1_ps(dw[i]), dx);
            const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[g][i])), s);
            acc[g][i] = _mm512_add_ps(acc[g][i], p);
          }
        }
      }
      for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t i = 0; i < nr; ++i) {
          alignas(64) float out[kTokens];
          _mm512_store_ps(out, acc[g][i]);
          const int64_t first = (g0 + g) * kTokens;
          for (int64_t t = first; t < std::min(n_tokens, first + kTokens); ++t)
            y[t * y_stride + r0 + i] = out[t - first];
        }
    }
  }
}

uint64_t amx_int8_peak_loop(int64_t iterations) {
  // Four C tiles of 16 x 16 int32 from one A and one B tile of 16 x 64 int8: four independent
  // tile products per round (a tile product's latency is about four of its issue intervals).
  AmxTileConfig c;
  for (int t = 0; t < 6; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  load_tile_config(c);
  amx_thread_tiles() = AmxTiles::Peak;  // the products load their own again on their next use
  alignas(64) int8_t operand[16][64];
  std::memset(operand, 1, sizeof operand);
  alignas(64) int32_t out[16][16];
  _tile_zero(0);  // tile numbers are immediates
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 5);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 5);
  }
  _tile_stored(0, out, 64);
  volatile int32_t sink = out[0][0];
  (void)sink;
  return static_cast<uint64_t>(iterations) * 4 * 16 * 16 * 64;
}

#else

AmxTiles& amx_thread_tiles() {
  thread_local AmxTiles tiles = AmxTiles::None;
  return tiles;
}

bool amx_available() {
  return false;
}

uint64_t amx_int8_peak_loop(int64_t) {
  fail("this build has no AMX kernels");
}

void amx_matmat_rows(const MatrixView&, int64_t, int64_t, std::span<const Q8Activation>, float*,
                     int64_t) {
  fail("this build has no AMX kernels");
}

void AmxInt8Activations::prepare(std::span<const Q8Activation>, int64_t) {
  fail("this build has no AMX kernels");
}

void amx_matmat_rows(const MatrixView&, int64_t, int64_t, const AmxInt8Activations&, float*,
                     int64_t) {
  fail("this build has no AMX kernels");
}

#endif

}  // namespace strata
