#include "tensor/iq_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "tensor/half.h"
#include "tensor/iq1_quantize.h"
#include "tensor/iq_lattice.h"
#include "tensor/iq_quants.h"

namespace strata {

namespace {

// What differs between the types: the grid, whether signs keep even parity, values per scale
// (32, or 16 for the split scales), and the reader's multiplier: x = d * kMul * (2l + 1) * q.
struct IqSpec {
  IqGrid grid;
  bool parity;
  int scale_values;
  float mul;
};

IqSpec spec_of(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
      return {IqGrid::IQ2XXS, true, 32, 0.125f};
    case DType::IQ2_XS:
      return {IqGrid::IQ2XS, true, 16, 0.125f};
    case DType::IQ2_S:
      return {IqGrid::IQ2S, false, 16, 0.125f};
    case DType::IQ3_XXS:
      return {IqGrid::IQ3XXS, true, 32, 0.25f};
    case DType::IQ3_S:
      return {IqGrid::IQ3S, false, 32, 1.0f};
    default:
      fail("strata cannot quantize to {}", dtype_name(t));
  }
}

// A block as the types store it before packing: per group its entry and sign bits, per scale
// group its 4-bit scale, the f16 block scale.
struct IqBlock {
  uint16_t d = 0;
  int entry[64] = {};
  uint8_t signs[64] = {};
  int scale[16] = {};
};

// Entries of `groups` groups of targets v = a * id (weights w) and the least-squares scale of
// those entries (x ~ s * q); returns sum(w x q)^2 / sum(w q^2), the error's reduction.
float fit_entries(const Lattice& L, const float* a, const float* w, int groups, float id,
                  int* entries, float& s) {
  float sumqx = 0, sumq2 = 0;
  const int width = L.width();
  for (int g = 0; g < groups; ++g) {
    float v[8];
    for (int j = 0; j < width; ++j) v[j] = a[g * width + j] * id;
    entries[g] = L.nearest(v, w + g * width);
    for (int j = 0; j < width; ++j) {
      const float q = L.value(entries[g], j);
      sumqx += w[g * width + j] * a[g * width + j] * q;
      sumq2 += w[g * width + j] * q * q;
    }
  }
  s = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  return sumq2 > 0 ? sumqx * sumqx / sumq2 : 0.0f;
}

// The best scale of one scale group's magnitudes a (targets may be negative: a flipped sign).
float best_scale(const Lattice& L, const float* a, const float* w, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, a[i]);
  if (amax <= 0) return 0.0f;
  int entries[8];
  float best = -1, best_s = 0;
  for (int k = -10; k <= 10; ++k) {
    float s = 0;
    const float metric =
        fit_entries(L, a, w, n / L.width(), L.top() * (1.0f + 0.04f * k) / amax, entries, s);
    if (metric > best && s > 0) best = metric, best_s = s;
  }
  // Once more at the best fit's own scale.
  float s = 0;
  if (best_s > 0 && fit_entries(L, a, w, n / L.width(), 1.0f / best_s, entries, s) > best && s > 0)
    best_s = s;
  return best_s;
}

// Magnitudes, signs and weights of a block; parity types flip the cheapest sign of an odd
// group of eight (its target magnitude then negative, so the search picks the smallest level).
void block_targets(const IqSpec& spec, const float* x, const float* importance, float* a, float* w,
                   uint8_t* sign_bytes) {
  iq_block_weights(x, importance, w);
  for (int i = 0; i < 256; ++i) a[i] = std::fabs(x[i]);
  for (int k = 0; k < 32; ++k) {
    uint8_t s = 0;
    for (int j = 0; j < 8; ++j)
      if (x[8 * k + j] < 0) s |= static_cast<uint8_t>(1u << j);
    if (spec.parity && __builtin_popcount(s) % 2 != 0) {
      int cheapest = 0;
      for (int j = 1; j < 8; ++j)
        if (w[8 * k + j] * a[8 * k + j] * a[8 * k + j] <
            w[8 * k + cheapest] * a[8 * k + cheapest] * a[8 * k + cheapest])
          cheapest = j;
      s ^= static_cast<uint8_t>(1u << cheapest);
      a[8 * k + cheapest] = -a[8 * k + cheapest];
    }
    sign_bytes[k] = s;
  }
}

IqBlock quantize_block(const IqSpec& spec, const float* x, const float* importance) {
  const Lattice& L = iq_lattice(spec.grid);
  float a[256], w[256];
  uint8_t sign_bytes[32];
  block_targets(spec, x, importance, a, w, sign_bytes);
  const int n_scales = 256 / spec.scale_values;
  float s[16];
  float smax = 0;
  for (int k = 0; k < n_scales; ++k) {
    s[k] = best_scale(L, a + k * spec.scale_values, w + k * spec.scale_values, spec.scale_values);
    smax = std::max(smax, s[k]);
  }
  IqBlock b;
  // Scales as d * mul * (2l + 1), l in 0..15.
  b.d = f32_to_f16(smax / (31.0f * spec.mul));
  const float d = f16_to_f32(b.d);
  const int width = L.width(), per_scale = spec.scale_values / width;
  for (int k = 0; k < n_scales; ++k) {
    const float ratio = d > 0 ? s[k] / (d * spec.mul) : 0.0f;
    b.scale[k] = std::clamp(static_cast<int>(std::lround((ratio - 1.0f) / 2.0f)), 0, 15);
    const float dl = d * spec.mul * static_cast<float>(2 * b.scale[k] + 1);
    float unused = 0;
    fit_entries(L, a + k * spec.scale_values, w + k * spec.scale_values, per_scale,
                dl > 0 ? 1.0f / dl : 0.0f, b.entry + k * per_scale, unused);
  }
  // The least-squares fits shrink the block (x . y < x . x under coarse rounding), and a model
  // multiplies the shrinkage through its layers: the block scale is set so that the importance-
  // weighted projection of the block onto its values is kept, sum(w x y) = sum(w x x).
  double xy = 0, xx = 0;
  for (int g = 0; g < 256 / width; ++g) {
    const int k = g / per_scale;
    const double dl = d * spec.mul * (2 * b.scale[k] + 1);
    for (int j = 0; j < width; ++j) {
      const int i = g * width + j;
      xy += w[i] * a[i] * dl * L.value(b.entry[g], j);
      xx += w[i] * a[i] * a[i];
    }
  }
  if (xy > 0 && xx > 0) b.d = f32_to_f16(static_cast<float>(d * xx / xy));
  for (int g = 0; g < 256 / width; ++g)
    b.signs[g] = static_cast<uint8_t>(sign_bytes[g * width / 8] >> (width == 4 ? 4 * (g % 2) : 0)) &
                 static_cast<uint8_t>(width == 4 ? 15 : 255);
  return b;
}

// Seven sign bits of the eight values of groups 2g, 2g + 1 (IQ3_XXS) or group g (IQ2).
uint32_t signs7(const IqBlock& b, int width, int k) {
  return width == 4 ? (b.signs[2 * k] | (b.signs[2 * k + 1] << 4)) & 127 : b.signs[k] & 127;
}

void pack(DType t, const IqBlock& q, void* dst) {
  switch (t) {
    case DType::IQ2_XXS: {
      auto& b = *static_cast<BlockIQ2_XXS*>(dst);
      b.d = q.d;
      for (int u = 0; u < 8; ++u) {
        uint32_t word = static_cast<uint32_t>(q.scale[u]) << 28;
        for (int l = 0; l < 4; ++l) {
          b.qs[8 * u + l] = static_cast<uint8_t>(q.entry[4 * u + l]);
          word |= signs7(q, 8, 4 * u + l) << (7 * l);
        }
        std::memcpy(b.qs + 8 * u + 4, &word, 4);
      }
      return;
    }
    case DType::IQ2_XS: {
      auto& b = *static_cast<BlockIQ2_XS*>(dst);
      b.d = q.d;
      for (int g = 0; g < 32; ++g)
        b.qs[g] = static_cast<uint16_t>(q.entry[g] | (signs7(q, 8, g) << 9));
      for (int u = 0; u < 8; ++u)
        b.scales[u] = static_cast<uint8_t>(q.scale[2 * u] | (q.scale[2 * u + 1] << 4));
      return;
    }
    case DType::IQ2_S: {
      auto& b = *static_cast<BlockIQ2_S*>(dst);
      b.d = q.d;
      std::memset(b.qh, 0, sizeof b.qh);
      for (int g = 0; g < 32; ++g) {
        b.qs[g] = static_cast<uint8_t>(q.entry[g]);
        b.qs[32 + g] = q.signs[g];
        b.qh[g / 4] |= static_cast<uint8_t>((q.entry[g] >> 8) << (2 * (g % 4)));
      }
      for (int u = 0; u < 8; ++u)
        b.scales[u] = static_cast<uint8_t>(q.scale[2 * u] | (q.scale[2 * u + 1] << 4));
      return;
    }
    case DType::IQ3_XXS: {
      auto& b = *static_cast<BlockIQ3_XXS*>(dst);
      b.d = q.d;
      for (int g = 0; g < 64; ++g) b.qs[g] = static_cast<uint8_t>(q.entry[g]);
      for (int u = 0; u < 8; ++u) {
        uint32_t word = static_cast<uint32_t>(q.scale[u]) << 28;
        for (int l = 0; l < 4; ++l) word |= signs7(q, 4, 4 * u + l) << (7 * l);
        std::memcpy(b.qs + 64 + 4 * u, &word, 4);
      }
      return;
    }
    case DType::IQ3_S: {
      auto& b = *static_cast<BlockIQ3_S*>(dst);
      b.d = q.d;
      std::memset(b.qh, 0, sizeof b.qh);
      std::memset(b.scales, 0, sizeof b.scales);
      for (int g = 0; g < 64; ++g) {
        b.qs[g] = static_cast<uint8_t>(q.entry[g]);
        b.qh[g / 8] |= static_cast<uint8_t>((q.entry[g] >> 8) << (g % 8));
      }
      for (int k = 0; k < 32; ++k)
        b.signs[k] = static_cast<uint8_t>(q.signs[2 * k] | (q.signs[2 * k + 1] << 4));
      for (int u = 0; u < 8; ++u)
        b.scales[u / 2] |= static_cast<uint8_t>(q.scale[u] << (4 * (u % 2)));
      return;
    }
    default:
      fail("strata cannot quantize to {}", dtype_name(t));
  }
}

}  // namespace

bool has_iq_quantizer(DType type) {
  switch (type) {
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
      return true;
    default:
      return false;
  }
}

void quantize_row_iq(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  if (type == DType::IQ1_S || type == DType::IQ1_M)
    return quantize_row_iq1(type, src, dst, n, importance);
  const IqSpec spec = spec_of(type);
  const uint64_t block_bytes = dtype_info(type).block_bytes;
  for (int64_t b = 0; b < n / 256; ++b)
    pack(type, quantize_block(spec, src + 256 * b, importance ? importance + 256 * b : nullptr),
         static_cast<uint8_t*>(dst) + static_cast<uint64_t>(b) * block_bytes);
}

}  // namespace strata
