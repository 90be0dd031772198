// The weight types strata reads through one generic path, "unit types": every 32 consecutive
// values of a row (a unit, aligned with the Q8_0 blocks the activation is quantized to) decode
// to 32 int8 quants q, a float scale d and, for types with a minimum, a float offset m:
//   x_i = d * q_i          (kHasMin false)      x_i = d * q_i + m     (kHasMin true)
// which is, value for value, how llama.cpp v0.5.0 dequantizes them (ggml-quants.c): Q4_1, Q5_0,
// Q5_1, IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0, Q1_0, Q2_0 and the lattice types of iq_quants.h
// (IQ2_*, IQ3_*, IQ1_*). A dot product with Q8_0 activations is
// then exact integer math per unit and one float expression (`unit_term`), added into four chains
// (unit u into chain u % 4) that are summed (c0 + c1) + (c2 + c3) at the end: every kernel, scalar
// or SIMD, follows that order, so they agree bit for bit. A new type of this shape is one UnitQuant
// specialisation and one row of kUnitTypeList.
//
// As in kquants.h the decoders have internal linkage (SIMD translation units compile them with
// their own flags) and are STRATA_HD (the CUDA decoders are these).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/iq_quants.h"

namespace strata {

constexpr int kUnitValues = 32;

// Block layouts exactly as GGUF stores them (ggml-common.h).
struct BlockQ4_1 {
  uint16_t d, m;   // f16 scale and minimum
  uint8_t qs[16];  // value j < 16 in the low nibble of byte j, j + 16 in the high nibble
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits: bit j of the little-endian word is value j's
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];  // indices into kvalues_iq4nl, nibbles as Q4_0's
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;    // top two bits of the eight 6-bit sub-block scales
  uint8_t scales_l[4];  // their low nibbles
  uint8_t qs[128];      // sub-block u: bytes 16u..16u+15, nibbles as IQ4_NL's
};
struct BlockMXFP4 {
  uint8_t e;       // E8M0 shared exponent
  uint8_t qs[16];  // E2M1 codes, nibbles as Q4_0's
};
struct BlockNVFP4 {
  uint8_t d[4];    // UE4M3 scales, one per 16 values
  uint8_t qs[32];  // E2M1 codes: 16 values s each in qs[8s..8s+7], low nibbles first
};
struct BlockTQ1_0 {
  uint8_t qs[48];  // five ternary digits per byte
  uint8_t qh[4];   // four per byte
  uint16_t d;
};
struct BlockTQ2_0 {
  uint8_t qs[64];  // 2-bit codes, 0..2 for -1..1
  uint16_t d;
};
struct BlockQ1_0 {
  uint16_t d;
  uint8_t qs[16];  // 128 sign bits
};
struct BlockQ2_0 {
  uint16_t d;
  uint8_t qs[16];  // 64 2-bit codes for -1, 0, 1, 2
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockNVFP4) == 36);
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66);
static_assert(sizeof(BlockQ1_0) == 18 && sizeof(BlockQ2_0) == 18);

namespace {

// Entry i of a 16-entry int8 table packed little-endian into two words (device code can read a
// constant this way without a table in device memory).
STRATA_HD inline int8_t packed_int8(uint64_t lo, uint64_t hi, int i) {
  const uint64_t w = i < 8 ? lo : hi;
  return static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * (i % 8))));
}
// IQ4_NL's non-linear levels: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113.
STRATA_HD inline int8_t iq4nl_level(int i) {
  return packed_int8(0xF6EADDCFBFAD9881ull, 0x7159453526190D01ull, i);
}
// E2M1 values doubled (MXFP4, NVFP4): 0 1 2 3 4 6 8 12 0 -1 -2 -3 -4 -6 -8 -12.
STRATA_HD inline int8_t fp4_level(int i) {
  return packed_int8(0x0C08060403020100ull, 0xF4F8FAFCFDFEFF00ull, i);
}
// E8M0 exponent e as 2^(e - 128), half the value it encodes (the levels above are doubled).
STRATA_HD inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// UE4M3 (4 exponent bits biased by 7, 3 mantissa bits; bit 7 unread, 0 and 0x7F zero) as ggml
// reads it, halved like e8m0_half: exact, (8 + m) * 2^(e - 11), or m * 2^-10 when e is 0.
STRATA_HD inline float ue4m3_half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int e = (x >> 3) & 15, m = x & 7;
  const uint32_t bits = static_cast<uint32_t>(e == 0 ? 127 - 10 : 127 + e - 11) << 23;
  float p;
  memcpy(&p, &bits, sizeof p);
  return static_cast<float>(e == 0 ? m : 8 + m) * p;
}

// The 16 nibble-coded values of bytes qs[0..15]: value j the low nibble of byte j, value j + 16
// the high nibble, each mapped through `level`.
template <class Level>
STRATA_HD inline void unpack_nibbles(const uint8_t* qs, int8_t* q, Level level) {
  for (int j = 0; j < 16; ++j) {
    q[j] = level(qs[j] & 15);
    q[j + 16] = level(qs[j] >> 4);
  }
}

template <DType T>
struct UnitQuant;

template <>
struct UnitQuant<DType::Q4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 32;
  static constexpr bool kHasMin = true;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int, int8_t* q, float& d, float& m, const H& half) {
    unpack_nibbles(b.qs, q, [](int v) { return static_cast<int8_t>(v); });
    d = half(b.d), m = half(b.m);
  }
};

// The fifth bits of Q5_0/Q5_1: value j's is bit j of qh read as a little-endian word.
STRATA_HD inline void add_fifth_bits(const uint8_t* qh, int8_t* q, int offset) {
  const uint32_t h =
      qh[0] | (uint32_t{qh[1]} << 8) | (uint32_t{qh[2]} << 16) | (uint32_t{qh[3]} << 24);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>((q[j] | (((h >> j) & 1) << 4)) - offset);
}

template <>
struct UnitQuant<DType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int, int8_t* q, float& d, float& m, const H& half) {
    unpack_nibbles(b.qs, q, [](int v) { return static_cast<int8_t>(v); });
    add_fifth_bits(b.qh, q, 16);
    d = half(b.d), m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 32;
  static constexpr bool kHasMin = true;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int, int8_t* q, float& d, float& m, const H& half) {
    unpack_nibbles(b.qs, q, [](int v) { return static_cast<int8_t>(v); });
    add_fifth_bits(b.qh, q, 0);
    d = half(b.d), m = half(b.m);
  }
};

template <>
struct UnitQuant<DType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int, int8_t* q, float& d, float& m, const H& half) {
    unpack_nibbles(b.qs, q, [](int v) { return iq4nl_level(v); });
    d = half(b.d), m = 0.0f;
  }
};

// IQ4_XS: eight sub-blocks of 32 with 6-bit scales stored + 32; d_u = d * (scale_u - 32).
template <>
struct UnitQuant<DType::IQ4_XS> {
  using Block = BlockIQ4_XS;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 256;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_K;
  STRATA_HD static int scale(const Block& b, int u) {
    return (((b.scales_l[u / 2] >> (4 * (u % 2))) & 15) | (((b.scales_h >> (2 * u)) & 3) << 4)) -
           32;
  }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d);
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    unpack_nibbles(b.qs + 16 * u, q, [](int v) { return iq4nl_level(v); });
    d = half(b.d) * static_cast<float>(scale(b, u)), m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::MXFP4> {
  using Block = BlockMXFP4;
  static constexpr bool kNibbleUnits = true;
  static constexpr int kBlockValues = 32;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int, int8_t* q, float& d, float& m, const H&) {
    unpack_nibbles(b.qs, q, [](int v) { return fp4_level(v); });
    d = e8m0_half(b.e), m = 0.0f;
  }
};

// NVFP4: 64-value blocks of four 16-value groups, each with its UE4M3 scale; unit u is groups
// 2(u % 2) (values 0..15) and 2(u % 2) + 1 (16..31), split scales as IQ2_XS's. llama.cpp
// multiplies it with Q8_0 activations, as here.
template <>
struct UnitQuant<DType::NVFP4> {
  using Block = BlockNVFP4;
  static constexpr int kBlockValues = 64;
  static constexpr bool kHasMin = false;
  static constexpr bool kSplitScale = true;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static float d_hi(const Block& b, int u, const H&) {
    return ue4m3_half(b.d[2 * u + 1]);
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H&) {
    for (int g = 0; g < 2; ++g)
      for (int j = 0; j < 8; ++j) {
        const uint8_t byte = b.qs[16 * u + 8 * g + j];
        q[16 * g + j] = fp4_level(byte & 15);
        q[16 * g + 8 + j] = fp4_level(byte >> 4);
      }
    d = ue4m3_half(b.d[2 * u]), m = 0.0f;
  }
};

// TQ1_0: the ternary digit n (0..4) of a byte, as ggml reads it: (uint8(byte * 3^n) * 3) >> 8.
STRATA_HD inline int8_t trit(uint8_t byte, int n) {
  const uint8_t pow3[5] = {1, 3, 9, 27, 81};
  const uint8_t scaled = static_cast<uint8_t>(byte * pow3[n]);
  return static_cast<int8_t>(((static_cast<uint16_t>(scaled) * 3) >> 8) - 1);
}

// TQ1_0's value order: values 0..159 are digit i / 32 of qs[i % 32]; 160..239 digit
// (i - 160) / 16 of qs[32 + i % 16]; 240..255 digit (i - 240) / 4 of qh[i % 4].
template <>
struct UnitQuant<DType::TQ1_0> {
  using Block = BlockTQ1_0;
  static constexpr int kBlockValues = 256;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_K;
  STRATA_HD static int scale(const Block&, int) { return 1; }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d);
  }
  STRATA_HD static int8_t value(const Block& b, int i) {
    if (i < 160) return trit(b.qs[i % 32], i / 32);
    if (i < 240) return trit(b.qs[32 + (i - 160) % 16], (i - 160) / 16);
    return trit(b.qh[(i - 240) % 4], (i - 240) / 4);
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    for (int j = 0; j < 32; ++j) q[j] = value(b, 32 * u + j);
    d = half(b.d), m = 0.0f;
  }
};

// TQ2_0: value 128c + 32l + j (c < 2, l < 4) is bits 2l..2l+1 of qs[32c + j], minus 1.
template <>
struct UnitQuant<DType::TQ2_0> {
  using Block = BlockTQ2_0;
  static constexpr int kBlockValues = 256;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_K;
  STRATA_HD static int scale(const Block&, int) { return 1; }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d);
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    const uint8_t* qs = b.qs + 32 * (u / 4);
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(((qs[j] >> (2 * (u % 4))) & 3) - 1);
    d = half(b.d), m = 0.0f;
  }
};

// Values 32u..32u+31 of codes of `bits` bits packed from the low bits up (value i in bits
// i * bits .. of the bytes), each mapped through `map`.
template <class Map>
STRATA_HD inline void unpack_packed(const uint8_t* qs, int u, int bits, int8_t* q, Map map) {
  for (int j = 0; j < 32; ++j) {
    const int at = (32 * u + j) * bits;
    q[j] = static_cast<int8_t>(map((qs[at / 8] >> (at % 8)) & ((1 << bits) - 1)));
  }
}

// Q1_0: value j is +1 where bit j % 8 of qs[j / 8] is set, else -1 (ggml: d or -d).
template <>
struct UnitQuant<DType::Q1_0> {
  using Block = BlockQ1_0;
  static constexpr int kBlockValues = 128;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    unpack_packed(b.qs, u, 1, q, [](int v) { return v != 0 ? 1 : -1; });
    d = half(b.d), m = 0.0f;
  }
};

// Q2_0: value j is bits 2(j % 4).. of qs[j / 4], minus 1.
template <>
struct UnitQuant<DType::Q2_0> {
  using Block = BlockQ2_0;
  static constexpr int kBlockValues = 64;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_0;
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    unpack_packed(b.qs, u, 2, q, [](int v) { return v - 1; });
    d = half(b.d), m = 0.0f;
  }
};

// Unit u of a row (its first byte `row`): the block it lies in and its index there.
// `half` converts the f16 scales: F16Half on the host and the device; SIMD translation units
// pass their exact lookup table instead (no shared inline function compiled with their flags).
struct F16Half {
  STRATA_HD float operator()(uint16_t h) const { return f16_to_f32(h); }
};
template <DType T, class H = F16Half>
STRATA_HD inline void row_unit(const uint8_t* row, int64_t u, int8_t* q, float& d, float& m,
                               const H& half = H()) {
  using U = UnitQuant<T>;
  constexpr int per_block = U::kBlockValues / kUnitValues;
  const auto& b = *reinterpret_cast<const typename U::Block*>(
      row + static_cast<uint64_t>(u / per_block) * sizeof(typename U::Block));
  U::unit(b, static_cast<int>(u % per_block), q, d, m, half);
}

// Types that scale the two 16-value halves of a unit apart (IQ2_XS, IQ2_S, IQ1_M, NVFP4): unit()'s
// d and scale() are the first half's, d_hi() and scale_hi() the second's.
template <DType T>
inline constexpr bool kSplitScale = requires {
  UnitQuant<T>::kSplitScale;
};
template <DType T, class H>
STRATA_HD inline float unit_d_hi(const typename UnitQuant<T>::Block& b, int u, float d,
                                 const H& half) {
  if constexpr (kSplitScale<T>) return UnitQuant<T>::d_hi(b, u, half);
  return d;
}
template <DType T>
STRATA_HD inline int unit_scale_hi(const typename UnitQuant<T>::Block& b, int u) {
  if constexpr (kSplitScale<T>) return UnitQuant<T>::scale_hi(b, u);
  return UnitQuant<T>::scale(b, u);
}

// Types whose blocks end in their quants as nibbles, unit by unit 16 bytes (value j the low
// nibble of byte j, value j + 16 the high one), everything else before them (scales, fifth bits):
// these interleave by rows (interleaved_rows.h).
template <DType T>
inline constexpr bool kNibbleUnits = requires {
  UnitQuant<T>::kNibbleUnits;
};

// One decoded value, as ggml's dequantization computes it (no fused multiply-add).
template <DType T>
STRATA_HD inline float unit_value(int8_t q, float d, float m) {
  if constexpr (UnitQuant<T>::kHasMin) return d * static_cast<float>(q) + m;
  return d * static_cast<float>(q);
}

// The 32 values of unit u of a row, as ggml's dequantization computes them.
template <DType T, class H = F16Half>
STRATA_HD inline void row_unit_values(const uint8_t* row, int64_t u, float* v,
                                      const H& half = H()) {
  using U = UnitQuant<T>;
  constexpr int per_block = U::kBlockValues / kUnitValues;
  const auto& b = *reinterpret_cast<const typename U::Block*>(
      row + static_cast<uint64_t>(u / per_block) * sizeof(typename U::Block));
  int8_t q[kUnitValues];
  float d = 0, m = 0;
  U::unit(b, static_cast<int>(u % per_block), q, d, m, half);
  const float d_hi = unit_d_hi<T>(b, static_cast<int>(u % per_block), d, half);
  for (int j = 0; j < kUnitValues; ++j) v[j] = unit_value<T>(q[j], j < 16 ? d : d_hi, m);
}

// One unit's share of a dot product with Q8_0 activations (scale dx), from the exact integer
// sum of q_i * a_i; types with a minimum add m times the activation's sum as llama.cpp's Q8_1
// stores it (`q8_1_sum`: f16 of the unrounded scale times the quants' sum), so strata's products
// equal llama.cpp's within float rounding.
template <DType T>
STRATA_HD inline float unit_term(float d, float m, float dx, float q8_1_sum, int32_t isum) {
  const float t = (d * dx) * static_cast<float>(isum);
  if constexpr (UnitQuant<T>::kHasMin) return t + m * q8_1_sum;
  return t;
}

// The same for a type with split scales (NVFP4): each 16-value half's exact integer sum times its
// own scale, as llama.cpp's products take each group.
STRATA_HD inline float unit_term_split(float d, float d_hi, float dx, int32_t isum_lo,
                                       int32_t isum_hi) {
  return (d * dx) * static_cast<float>(isum_lo) + (d_hi * dx) * static_cast<float>(isum_hi);
}

// Types whose products read Q8_K super-blocks as llama.cpp's do (IQ4_XS, TQ1_0, TQ2_0): unit u
// is block_d * scale(u) * q, and a super-block's share of a dot product is one exact integer,
// the sum over its units of scale(u) * sum(q_i * a_i), times the two scales (`unit_k_term`).
STRATA_HD inline float unit_k_term(float d, float dx, int32_t isum) {
  return (d * dx) * static_cast<float>(isum);
}
// The super-block holding unit u of a row.
template <DType T>
STRATA_HD inline const typename UnitQuant<T>::Block& row_block(const uint8_t* row, int64_t u) {
  using U = UnitQuant<T>;
  constexpr int per_block = U::kBlockValues / kUnitValues;
  return *reinterpret_cast<const typename U::Block*>(row + static_cast<uint64_t>(u / per_block) *
                                                               sizeof(typename U::Block));
}

// The four chains of a dot product summed in their fixed order.
STRATA_HD inline float sum_chains(const float* c) {
  return (c[0] + c[1]) + (c[2] + c[3]);
}

}  // namespace

// The unit types in kernel-table order (unit_slot), and their number.
inline constexpr DType kUnitTypeList[] = {
    DType::Q4_1,  DType::Q5_0,    DType::Q5_1,  DType::IQ4_NL, DType::IQ4_XS,  DType::MXFP4,
    DType::TQ1_0, DType::TQ2_0,   DType::Q1_0,  DType::Q2_0,   DType::IQ2_XXS, DType::IQ2_XS,
    DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,  DType::IQ1_M,   DType::NVFP4};
inline constexpr int kUnitTypes = sizeof(kUnitTypeList) / sizeof(kUnitTypeList[0]);
// -1 for a type that is not a unit type.
inline int unit_slot(DType t) {
  for (int i = 0; i < kUnitTypes; ++i)
    if (kUnitTypeList[i] == t) return i;
  return -1;
}
inline bool is_unit_type(DType t) {
  return unit_slot(t) >= 0;
}

// Calls f.template operator()<T>() for a unit type (nothing for another).
template <class F>
inline void with_unit_type(DType t, F&& f) {
  switch (t) {
    case DType::Q4_1:
      return f.template operator()<DType::Q4_1>();
    case DType::Q5_0:
      return f.template operator()<DType::Q5_0>();
    case DType::Q5_1:
      return f.template operator()<DType::Q5_1>();
    case DType::IQ4_NL:
      return f.template operator()<DType::IQ4_NL>();
    case DType::IQ4_XS:
      return f.template operator()<DType::IQ4_XS>();
    case DType::MXFP4:
      return f.template operator()<DType::MXFP4>();
    case DType::TQ1_0:
      return f.template operator()<DType::TQ1_0>();
    case DType::TQ2_0:
      return f.template operator()<DType::TQ2_0>();
    case DType::Q1_0:
      return f.template operator()<DType::Q1_0>();
    case DType::Q2_0:
      return f.template operator()<DType::Q2_0>();
    case DType::IQ2_XXS:
      return f.template operator()<DType::IQ2_XXS>();
    case DType::IQ2_XS:
      return f.template operator()<DType::IQ2_XS>();
    case DType::IQ2_S:
      return f.template operator()<DType::IQ2_S>();
    case DType::IQ3_XXS:
      return f.template operator()<DType::IQ3_XXS>();
    case DType::IQ3_S:
      return f.template operator()<DType::IQ3_S>();
    case DType::IQ1_S:
      return f.template operator()<DType::IQ1_S>();
    case DType::IQ1_M:
      return f.template operator()<DType::IQ1_M>();
    case DType::NVFP4:
      return f.template operator()<DType::NVFP4>();
    default:
      return;
  }
}

inline bool is_nibble_unit_type(DType t) {
  bool nibbles = false;
  with_unit_type(t, [&]<DType T>() { nibbles = kNibbleUnits<T>; });
  return nibbles;
}

// Rows of n values (a multiple of the block) of a unit type to f32, as ggml dequantizes them.
void dequantize_row_unit(DType type, const void* src, float* dst, int64_t n);
// strata's quantizers for the unit types that have one (has_unit_quantizer): Q4_1, Q5_0, Q5_1,
// MXFP4, NVFP4, TQ1_0, TQ2_0, Q1_0 and Q2_0 follow ggml's reference rules; IQ4_NL and IQ4_XS search scales for the least
// squared error (tensor/unit_quantize.cpp).
bool has_unit_quantizer(DType type);
void quantize_row_unit(DType type, const float* src, void* dst, int64_t n);

}  // namespace strata
