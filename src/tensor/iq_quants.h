// llama.cpp's lattice ("IQ") types as unit types (tensor/unit_quants.h): IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Each 32-value unit is grid entries (tensor/iq_grids.h) with
// signs under an integer scale, so it decodes to int8 quants times block_d * scale:
//   IQ2_*, IQ3_XXS   q = +-grid byte, ggml's db = d * (0.5 + s) / 4 (or / 2) = d/8 (d/4) * (2s + 1)
//   IQ3_S            q = +-grid byte, db = d * (2s + 1)
//   IQ1_S, IQ1_M     q = 8 * grid +- 1, as ggml's dl * (grid +- 1/8) = dl/8 * (8 grid +- 1)
// bit for bit the float ggml's dequantization computes (the factors 1/8, 1/4 are exact). IQ2_XS,
// IQ2_S and IQ1_M scale each 16 values of a unit apart (kSplitScale: d_hi, scale_hi for values
// 16..31). All read Q8_K activations, as llama.cpp's products do.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"
#include "tensor/dtype.h"
#include "tensor/iq_grids.h"

namespace strata {

// Block layouts exactly as GGUF stores them (ggml-common.h), 256 values each.
struct BlockIQ2_XXS {
  uint16_t d;
  uint8_t qs[64];  // unit u: 4 grid indices, then a word of 4 x 7 sign bits and a 4-bit scale
};
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[32];    // 9-bit grid index, 7 sign bits
  uint8_t scales[8];  // two 4-bit scales per unit
};
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[64];  // 32 grid index low bytes, then 32 sign bytes
  uint8_t qh[8];   // the indices' top 2 bits
  uint8_t scales[8];
};
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[96];  // 64 grid indices, then per unit a word of 4 x 7 sign bits and a 4-bit scale
};
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];  // the indices' ninth bits
  uint8_t signs[32];
  uint8_t scales[4];  // one 4-bit scale per unit
};
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];  // per unit: 4 x 3 index bits, 3-bit scale, the sign of the shift
};
struct BlockIQ1_M {
  uint8_t qs[32];
  uint8_t qh[16];     // per 8 values: 3 index bits and the sign of the shift
  uint8_t scales[8];  // 3-bit scales per 16 values; the top nibbles of the words hold f16 d
};
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);

namespace {

template <DType T>
struct UnitQuant;

STRATA_HD inline uint32_t iq_word(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
// Eight values of grid entry `entry` with the signs of bits 0..7 of `signs`.
STRATA_HD inline void iq_signed_entry(IqGrid g, int entry, uint32_t signs, int8_t* q) {
  for (int j = 0; j < iq_grid_width(g); ++j) {
    const int8_t v = iq_grid_value(g, entry, j);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
// Eight values 8 * grid +- 1 (IQ1: minus where `minus`).
STRATA_HD inline void iq1_entry(int entry, bool minus, int8_t* q) {
  for (int j = 0; j < 8; ++j)
    q[j] = static_cast<int8_t>(8 * iq_grid_value(IqGrid::IQ1S, entry, j) + (minus ? -1 : 1));
}

// Shared members of the IQ traits: 256-value blocks, Q8_K activations, no minimum.
struct IqUnit {
  static constexpr int kBlockValues = 256;
  static constexpr bool kHasMin = false;
  static constexpr ActivationForm kInput = ActivationForm::Q8_K;
};

template <>
struct UnitQuant<DType::IQ2_XXS> : IqUnit {
  using Block = BlockIQ2_XXS;
  STRATA_HD static int scale(const Block& b, int u) {
    return 2 * (iq_word(b.qs + 8 * u + 4) >> 28) + 1;
  }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d) * 0.125f;
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    const uint32_t w = iq_word(b.qs + 8 * u + 4);
    for (int l = 0; l < 4; ++l)
      iq_signed_entry(IqGrid::IQ2XXS, b.qs[8 * u + l], iq_signs7(w >> (7 * l)), q + 8 * l);
    d = half(b.d) * (0.5f + static_cast<float>(w >> 28)) * 0.25f, m = 0.0f;
  }
};

// IQ2_XS and IQ2_S: scales[u]'s low nibble for values 0..15, its high nibble for 16..31.
struct IqSplitNibbles : IqUnit {
  static constexpr bool kSplitScale = true;
  template <class B>
  STRATA_HD static int scale(const B& b, int u) {
    return 2 * (b.scales[u] & 15) + 1;
  }
  template <class B>
  STRATA_HD static int scale_hi(const B& b, int u) {
    return 2 * (b.scales[u] >> 4) + 1;
  }
  template <class B, class H>
  STRATA_HD static float block_d(const B& b, const H& half) {
    return half(b.d) * 0.125f;
  }
  template <class B, class H>
  STRATA_HD static float d_hi(const B& b, int u, const H& half) {
    return half(b.d) * (0.5f + static_cast<float>(b.scales[u] >> 4)) * 0.25f;
  }
  template <class B, class H>
  STRATA_HD static float d_lo(const B& b, int u, const H& half) {
    return half(b.d) * (0.5f + static_cast<float>(b.scales[u] & 15)) * 0.25f;
  }
};

template <>
struct UnitQuant<DType::IQ2_XS> : IqSplitNibbles {
  using Block = BlockIQ2_XS;
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = b.qs[4 * u + l];
      iq_signed_entry(IqGrid::IQ2XS, v & 511, iq_signs7(v >> 9), q + 8 * l);
    }
    d = d_lo(b, u, half), m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::IQ2_S> : IqSplitNibbles {
  using Block = BlockIQ2_S;
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    for (int l = 0; l < 4; ++l) {
      const int entry = b.qs[4 * u + l] | ((b.qh[u] << (8 - 2 * l)) & 0x300);
      iq_signed_entry(IqGrid::IQ2S, entry, b.qs[32 + 4 * u + l], q + 8 * l);
    }
    d = d_lo(b, u, half), m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::IQ3_XXS> : IqUnit {
  using Block = BlockIQ3_XXS;
  STRATA_HD static int scale(const Block& b, int u) {
    return 2 * (iq_word(b.qs + 64 + 4 * u) >> 28) + 1;
  }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d) * 0.25f;
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    const uint32_t w = iq_word(b.qs + 64 + 4 * u);
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = iq_signs7(w >> (7 * l));
      iq_signed_entry(IqGrid::IQ3XXS, b.qs[8 * u + 2 * l], signs, q + 8 * l);
      iq_signed_entry(IqGrid::IQ3XXS, b.qs[8 * u + 2 * l + 1], signs >> 4, q + 8 * l + 4);
    }
    d = half(b.d) * (0.5f + static_cast<float>(w >> 28)) * 0.5f, m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::IQ3_S> : IqUnit {
  using Block = BlockIQ3_S;
  STRATA_HD static int scale(const Block& b, int u) {
    return 1 + 2 * ((b.scales[u / 2] >> (4 * (u % 2))) & 15);
  }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d);
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    for (int l = 0; l < 4; ++l) {
      const int e1 = b.qs[8 * u + 2 * l] | ((b.qh[u] << (8 - 2 * l)) & 256);
      const int e2 = b.qs[8 * u + 2 * l + 1] | ((b.qh[u] << (7 - 2 * l)) & 256);
      iq_signed_entry(IqGrid::IQ3S, e1, b.signs[4 * u + l], q + 8 * l);
      iq_signed_entry(IqGrid::IQ3S, e2, b.signs[4 * u + l] >> 4, q + 8 * l + 4);
    }
    d = half(b.d) * static_cast<float>(scale(b, u)), m = 0.0f;
  }
};

template <>
struct UnitQuant<DType::IQ1_S> : IqUnit {
  using Block = BlockIQ1_S;
  STRATA_HD static int scale(const Block& b, int u) { return 2 * ((b.qh[u] >> 12) & 7) + 1; }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return half(b.d) * 0.125f;
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d, float& m, const H& half) {
    const uint16_t h = b.qh[u];
    for (int l = 0; l < 4; ++l)
      iq1_entry(b.qs[4 * u + l] | (((h >> (3 * l)) & 7) << 8), (h & 0x8000) != 0, q + 8 * l);
    d = half(b.d) * static_cast<float>(scale(b, u)) * 0.125f, m = 0.0f;
  }
};

// IQ1_M: the f16 d is the top nibbles of the four scale words; unit u's 3-bit scales are bits
// 6(u % 2).. (values 0..15) and 6(u % 2) + 3.. (16..31) of word u / 2.
template <>
struct UnitQuant<DType::IQ1_M> : IqUnit {
  using Block = BlockIQ1_M;
  static constexpr bool kSplitScale = true;
  STRATA_HD static uint16_t word(const Block& b, int i) {
    return static_cast<uint16_t>(b.scales[2 * i] | (b.scales[2 * i + 1] << 8));
  }
  STRATA_HD static int scale(const Block& b, int u) {
    return 2 * ((word(b, u / 2) >> (6 * (u % 2))) & 7) + 1;
  }
  STRATA_HD static int scale_hi(const Block& b, int u) {
    return 2 * ((word(b, u / 2) >> (6 * (u % 2) + 3)) & 7) + 1;
  }
  template <class H>
  STRATA_HD static float d(const Block& b, const H& half) {
    return half(static_cast<uint16_t>((word(b, 0) >> 12) | ((word(b, 1) >> 8) & 0x00f0) |
                                      ((word(b, 2) >> 4) & 0x0f00) | (word(b, 3) & 0xf000)));
  }
  template <class H>
  STRATA_HD static float block_d(const Block& b, const H& half) {
    return d(b, half) * 0.125f;
  }
  template <class H>
  STRATA_HD static float d_hi(const Block& b, int u, const H& half) {
    return d(b, half) * static_cast<float>(scale_hi(b, u)) * 0.125f;
  }
  template <class H>
  STRATA_HD static void unit(const Block& b, int u, int8_t* q, float& d_lo, float& m,
                             const H& half) {
    for (int l = 0; l < 4; ++l) {
      const uint8_t h = b.qh[2 * u + l / 2] >> (4 * (l % 2));
      iq1_entry(b.qs[4 * u + l] | ((h & 7) << 8), (h & 8) != 0, q + 8 * l);
    }
    d_lo = d(b, half) * static_cast<float>(scale(b, u)) * 0.125f, m = 0.0f;
  }
};

}  // namespace

}  // namespace strata
