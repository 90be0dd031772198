// GGUF's K-quant super-blocks (Q2_K..Q6_K, and Q8_K for activations), exactly as the files
// store them: 256 values per super-block, split into sub-blocks with their own scales.
//
// Every type is read through one model. Element i of a super-block has an unsigned stored
// quant q_i (`quant`) and belongs to group g = i / 16 (Q4_K/Q5_K sub-blocks are 32 values:
// their scale and min repeat over two groups) with integer scale s_g (`scale`) and, for types
// with a minimum, integer min m_g (`min`):
//   with a minimum (Q2_K, Q4_K, Q5_K):  x_i = (d * s_g) * q_i - (dmin * m_g)
//   symmetric      (Q3_K, Q6_K):        x_i = (d * s_g) * (q_i - offset)
// so a dot product with Q8_K activations a (scale d_a, group sums bsum_g) is integer math per
// super-block, isum = sum_g s_g * sum_{i in g} q_i a_i and imin = sum_g m_g * bsum_g (symmetric:
// m_g = offset * s_g), then one float expression (`superblock_dot`). The functions are
// STRATA_HD so the CUDA kernels use the same decoding and the same per-block arithmetic.
//
// The decoding functions have internal linkage (an unnamed namespace): SIMD translation units
// compile them with their own target flags, and a shared inline copy could hand AVX2 code to a
// baseline caller. For the same reason they return the f16 scales as bits (`d_bits`); callers
// convert them (f16_to_f32, or the SIMD kernels' exact lookup table).
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "tensor/dtype.h"

namespace strata {

constexpr int kQK_K = 256;
constexpr int kKGroups = kQK_K / 16;  // 16-value groups per super-block

struct BlockQ2_K {
  uint8_t scales[16];  // group g: scale in the low nibble, min in the high nibble
  uint8_t qs[64];      // 2-bit quants (see quant())
  uint16_t d, dmin;    // f16 super-block scales of the scales and of the mins
};
struct BlockQ3_K {
  uint8_t hmask[32];   // the third bit of each quant
  uint8_t qs[64];      // the low two bits
  uint8_t scales[12];  // 16 6-bit scales, stored + 32
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 6-bit scales and 8 6-bit mins, one per 32 values
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // the fifth bit
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];    // low four bits
  uint8_t qh[64];     // high two bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kKGroups];  // sum of each group's 16 quants
};
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

inline bool is_kquant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K;
}
// The K-quant weight types in kernel-table order.
constexpr int kKQuantTypes = 5;
inline int kquant_slot(DType t) {
  return static_cast<int>(t) - static_cast<int>(DType::Q2_K);
}

// Rows of n values (a multiple of 256) to and from the K-quant types and Q8_K.
// importance (may be null): one weight per value of the row, its column's importance.
void quantize_row_kquant(DType type, const float* x, void* dst, int64_t n,
                         const float* importance = nullptr);
void dequantize_row_kquant(DType type, const void* src, float* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);

namespace {

// Q4_K/Q5_K's 6-bit scale (want_min = false) or min of sub-block j (0..7) out of 12 bytes:
// sub-blocks 0-3 in the low six bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep
// their low four bits in the nibbles of bytes 8-11 and their top two bits in the top bits of
// bytes 0-3 (scales) and 4-7 (mins).
STRATA_HD inline int k4_scale_or_min(const uint8_t* s, int j, bool want_min) {
  if (j < 4) return s[j + (want_min ? 4 : 0)] & 63;
  const int low = want_min ? s[j + 4] >> 4 : s[j + 4] & 15;
  return low | ((s[j - (want_min ? 0 : 4)] >> 6) << 4);
}

// Q3_K's 6-bit scale of group g (0..15), stored + 32: the low four bits in byte g (g < 8) or
// the high nibble of byte g - 8; the top two bits in bits 2*(g/4) of byte 8 + g % 4.
STRATA_HD inline int k3_scale(const uint8_t* s, int g) {
  const int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4;
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

template <class Block>
struct KQuant;

// Q2_K: element i = 128n + 32j + l (n < 2, j < 4, l < 32) is bits 2j..2j+1 of qs[32n + l].
template <>
struct KQuant<BlockQ2_K> {
  static constexpr DType type = DType::Q2_K;
  static constexpr bool has_min = true;
  static constexpr int offset = 0;
  STRATA_HD static int quant(const BlockQ2_K& b, int i) {
    return (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
  }
  STRATA_HD static int scale(const BlockQ2_K& b, int g) { return b.scales[g] & 15; }
  STRATA_HD static int min(const BlockQ2_K& b, int g) { return b.scales[g] >> 4; }
  STRATA_HD static uint16_t d_bits(const BlockQ2_K& b) { return b.d; }
  STRATA_HD static uint16_t dmin_bits(const BlockQ2_K& b) { return b.dmin; }
};

// Q3_K: the low bits as Q2_K's; the third bit of element 128n + 32j + l is bit 4n + j of
// hmask[l]. The stored quant is the value + 4 (a clear bit means the value is 4 lower).
template <>
struct KQuant<BlockQ3_K> {
  static constexpr DType type = DType::Q3_K;
  static constexpr bool has_min = false;
  static constexpr int offset = 4;
  STRATA_HD static int quant(const BlockQ3_K& b, int i) {
    const int low = (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
    const int high = (b.hmask[i % 32] >> (4 * (i / 128) + (i / 32) % 4)) & 1;
    return low | (high << 2);
  }
  STRATA_HD static int scale(const BlockQ3_K& b, int g) { return k3_scale(b.scales, g); }
  STRATA_HD static int min(const BlockQ3_K& b, int g) { return offset * scale(b, g); }
  STRATA_HD static uint16_t d_bits(const BlockQ3_K& b) { return b.d; }
  STRATA_HD static uint16_t dmin_bits(const BlockQ3_K& b) { return b.d; }
};

// Q4_K and Q5_K: 8 sub-blocks of 32 values, each with a 6-bit scale and min (k4_scale_or_min);
// element 64c + l (l < 32) is the low nibble of qs[32c + l], 64c + 32 + l its high nibble.
template <class Block>
struct K4Quant {
  static constexpr bool has_min = true;
  static constexpr int offset = 0;
  STRATA_HD static int nibble(const Block& b, int i) {
    const uint8_t byte = b.qs[32 * (i / 64) + i % 32];
    return (i % 64) < 32 ? byte & 15 : byte >> 4;
  }
  STRATA_HD static int scale(const Block& b, int g) {
    return k4_scale_or_min(b.scales, g / 2, false);
  }
  STRATA_HD static int min(const Block& b, int g) { return k4_scale_or_min(b.scales, g / 2, true); }
  STRATA_HD static uint16_t d_bits(const Block& b) { return b.d; }
  STRATA_HD static uint16_t dmin_bits(const Block& b) { return b.dmin; }
};

template <>
struct KQuant<BlockQ4_K> : K4Quant<BlockQ4_K> {
  static constexpr DType type = DType::Q4_K;
  STRATA_HD static int quant(const BlockQ4_K& b, int i) { return nibble(b, i); }
};

// Q5_K: Q4_K's nibbles plus a fifth bit: element 64c + l takes bit 2c of qh[l], element
// 64c + 32 + l bit 2c + 1.
template <>
struct KQuant<BlockQ5_K> : K4Quant<BlockQ5_K> {
  static constexpr DType type = DType::Q5_K;
  STRATA_HD static int quant(const BlockQ5_K& b, int i) {
    return nibble(b, i) | (((b.qh[i % 32] >> (i / 32)) & 1) << 4);
  }
};

// Q6_K: element 128n + 32k + l (k < 4, l < 32): low four bits from ql[64n + l + 32 (k % 2)]
// (low nibble for k < 2, high for k >= 2), high two bits 2k..2k+1 of qh[32n + l]; value - 32.
template <>
struct KQuant<BlockQ6_K> {
  static constexpr DType type = DType::Q6_K;
  static constexpr bool has_min = false;
  static constexpr int offset = 32;
  STRATA_HD static int quant(const BlockQ6_K& b, int i) {
    const int n = i / 128, k = (i / 32) % 4, l = i % 32;
    const uint8_t lowbyte = b.ql[64 * n + l + 32 * (k % 2)];
    const int low = k < 2 ? lowbyte & 15 : lowbyte >> 4;
    const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
    return low | (high << 4);
  }
  STRATA_HD static int scale(const BlockQ6_K& b, int g) { return b.scales[g]; }
  STRATA_HD static int min(const BlockQ6_K& b, int g) { return offset * scale(b, g); }
  STRATA_HD static uint16_t d_bits(const BlockQ6_K& b) { return b.d; }
  STRATA_HD static uint16_t dmin_bits(const BlockQ6_K& b) { return b.d; }
};

// A super-block's value i as a float: the one definition dequantization, the embedding lookup
// and every axpy kernel follow (products computed as written: no fused multiply-add).
template <class Block>
STRATA_HD inline float kquant_value(float d, float dmin, int scale, int min, int q) {
  using K = KQuant<Block>;
  const float dl = d * static_cast<float>(scale);
  if constexpr (K::has_min) return dl * static_cast<float>(q) - dmin * static_cast<float>(min);
  return dl * static_cast<float>(q - K::offset);
}

// One super-block's share of a dot product from its integer sums (see the header comment).
template <class Block>
STRATA_HD inline float superblock_dot(float d_a, float d, float dmin, int32_t isum, int32_t imin) {
  if constexpr (KQuant<Block>::has_min)
    return d_a * (d * static_cast<float>(isum) - dmin * static_cast<float>(imin));
  return d_a * (d * static_cast<float>(isum - imin));
}

// A super-block's integer sums against Q8_K activations: the reference every kernel matches.
template <class Block>
STRATA_HD inline void superblock_sums(const Block& w, const BlockQ8_K& x, int32_t& isum,
                                      int32_t& imin) {
  using K = KQuant<Block>;
  isum = 0, imin = 0;
  for (int g = 0; g < kKGroups; ++g) {
    int32_t group = 0;
    for (int i = 16 * g; i < 16 * (g + 1); ++i) group += K::quant(w, i) * int32_t{x.qs[i]};
    isum += K::scale(w, g) * group;
    imin += K::min(w, g) * int32_t{x.bsums[g]};
  }
}

}  // namespace
}  // namespace strata
