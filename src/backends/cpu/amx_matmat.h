// Batched products of Q8_0/Q4_0 weights with Q8_0 activations on Intel AMX (tile int8 matrix
// multiply), for prompts: 16 weight rows x up to 16 tokens x one 32-value block per tile
// instruction. Each block's int32 dot product is exact; it is then scaled and summed in block
// order exactly as the scalar reference kernel does (multiply, then add; no fused multiply-add),
// so the results equal scalar_kernels().dot_q8_0 / dot_q4_0 bit for bit. Interleaved rows
// (Layout::Interleaved16) are read as they lie; their ranges must start and end at groups of 16.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "tensor/matrix.h"

namespace strata {

// True when the CPU has AMX-INT8 and the kernel lets this process use the tile registers
// (Linux asks each process to request them). STRATA_CPU=... other than "amx"/unset disables it.
bool amx_available();

// y[t * y_stride + r] = W[r] . x[t] for rows [row_begin, row_end) and every token t (at most
// kAmxMaxTokens).
inline constexpr int64_t kAmxMaxTokens = 32;
void amx_matmat_rows(const MatrixView& w, int64_t row_begin, int64_t row_end,
                     std::span<const Q8Activation> x, float* y, int64_t y_stride);

// A batch's Q8_0 activations packed once as the file-layout kernel's tile B (16 tokens x one
// block of 32 values, four consecutive values of a token side by side) with their block
// scales, for products over many short row ranges (a sparse gather's panels).
class AmxInt8Activations {
 public:
  void prepare(std::span<const Q8Activation> x, int64_t cols);
  int64_t tokens() const { return tokens_; }
  int64_t blocks() const { return blocks_; }
  // Token group g (16 tokens), block b: the B tile and the 16 scales.
  const int8_t* tile(int64_t g, int64_t b) const {
    return packed_.data() + (g * blocks_ + b) * 32 * 16;
  }
  const float* scales(int64_t g, int64_t b) const {
    return scales_.data() + (g * blocks_ + b) * 16;
  }
  // What prepare holds for `tokens` activations of `cols` values.
  static uint64_t bytes(int64_t tokens, int64_t cols) {
    return static_cast<uint64_t>((tokens + 15) / 16) * static_cast<uint64_t>((cols + 31) / 32) *
           16 * (32 + sizeof(float));
  }

 private:
  int64_t tokens_ = 0, blocks_ = 0;
  std::vector<int8_t> packed_;
  std::vector<float> scales_;
};

// The same for Q8_0/Q4_0 rows in the file's layout and every token of `x`, prepacked.
void amx_matmat_rows(const MatrixView& w, int64_t row_begin, int64_t row_end,
                     const AmxInt8Activations& x, float* y, int64_t y_stride);

// `strata bench`'s compute limit on AMX: `iterations` rounds of four independent int8 tile
// products; returns the multiply-adds performed. Only after amx_available().
uint64_t amx_int8_peak_loop(int64_t iterations);

// The tile shapes this thread's AMX configuration holds (a thread has one): each kernel loads
// its own when it finds another's.
enum class AmxTiles { None, Int8, Bf16, Peak };
AmxTiles& amx_thread_tiles();

// The tile configuration _tile_loadconfig reads (palette 1: rows and bytes per row of each tile).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

#if defined(__AMX_TILE__)
}  // namespace strata
#include <immintrin.h>
namespace strata {
// _tile_loadconfig reads the whole configuration, but GCC 12 does not see that read and may
// drop the stores to rows and colsb before it (seen: a configuration of zero rows, SIGILL at
// the first tile load): the empty asm makes the configuration's memory observed first.
inline void load_tile_config(const AmxTileConfig& c) {
  asm volatile("" : : "r"(&c) : "memory");
  _tile_loadconfig(&c);
}
#endif

// F16 weights (the file's rows) times float activations on AMX-BF16 tiles, for prompts. Each
// weight is split exactly into two BF16 parts (hi + lo: an F16 value has 11 significant bits),
// each activation exactly into three (8 of its 24 bits each), and the five products that matter
// (all but the activation's last part times the weight's lo, under 2^-24 of the product) are
// summed in F32 along the whole row: as exact as an F32 product (llama.cpp rounds activations to
// F16, 2^-11). The sums go in an order of their own, so results equal the float tile kernels'
// within rounding, the same at any thread count.
bool amx_bf16_available();  // AMX-BF16 and amx_available()

// A batch's activations (at most kAmxBf16MaxTokens of `cols` floats) split into BF16 pairs as
// the tile products read them; made once per batched product, shared by its threads.
inline constexpr int64_t kAmxBf16MaxTokens = 64;
inline constexpr int kActivationParts = 3;
// `strata bench`'s compute limit for F16 prompts: `iterations` rounds of four independent BF16
// tile products; returns the BF16 multiply-adds performed. Only after amx_bf16_available().
uint64_t amx_bf16_peak_loop(int64_t iterations);

class AmxBf16Activations {
 public:
  void prepare(std::span<const float* const> x, int64_t cols);
  // What prepare holds for `tokens` activations of `cols` values.
  static uint64_t bytes(int64_t tokens, int64_t cols) {
    return static_cast<uint64_t>((tokens + 15) / 16) * static_cast<uint64_t>((cols + 31) / 32) *
           kActivationParts * 16 * sizeof(Line);
  }
  int64_t tokens() const { return tokens_; }
  int64_t steps() const { return steps_; }  // tile steps of 32 values along a row
  // Tile B of token block `block` (16 tokens) at step s, part 0, 1 or 2 of the split: 16 rows
  // of 16 value pairs.
  const uint16_t* tile(int64_t block, int64_t s, int part) const {
    return packed_.data()->halves + ((block * steps_ + s) * kActivationParts + part) * 512;
  }

 private:
  struct alignas(64) Line {  // tile rows are cache lines
    uint16_t halves[32];
  };
  int64_t tokens_ = 0, steps_ = 0;
  std::vector<Line> packed_;
};

// y[t * y_stride + r] = W[r] . x[t] for rows [row_begin, row_end) and every token t.
void amx_matmat_f16(const MatrixView& w, int64_t row_begin, int64_t row_end,
                    const AmxBf16Activations& x, float* y, int64_t y_stride);

}  // namespace strata
