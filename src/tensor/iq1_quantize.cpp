#include "tensor/iq1_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/half.h"
#include "tensor/iq_lattice.h"
#include "tensor/iq_quants.h"

namespace strata {

namespace {

constexpr float kDelta = 0.125f;

// A block before packing: per group its entry and the sign of its delta, per scale group its
// 3-bit scale, and the block scale.
struct Iq1Block {
  float d = 0;
  int entry[32] = {};
  bool minus[32] = {};
  int scale[16] = {};
};

// The layout: values per scale, per delta.
struct Iq1Spec {
  int scale_values, delta_values;
};

// Entries and delta signs of n values (groups of 8, one delta per delta_values) at scale 1/id,
// and the least-squares scale of them (x ~ s * (g + delta)); returns sum(w x q)^2 / sum(w q^2).
float fit(const Lattice& L, const float* x, const float* w, int n, int delta_values, float id,
          int* entries, bool* minus, float& s) {
  double sumqx = 0, sumq2 = 0;
  for (int d0 = 0; d0 < n; d0 += delta_values) {
    // Both deltas for this run of groups; the one nearer its targets kept.
    int best_e[4] = {}, e[4] = {};
    double best_err = INFINITY;
    bool best_minus = false;
    for (const bool m : {false, true}) {
      const float delta = m ? -kDelta : kDelta;
      double err = 0;
      for (int g = 0; g < delta_values / 8; ++g) {
        float v[8];
        const float* xg = x + d0 + 8 * g;
        for (int j = 0; j < 8; ++j) v[j] = xg[j] * id - delta;
        e[g] = L.nearest(v, w + d0 + 8 * g);
        for (int j = 0; j < 8; ++j) {
          const float diff = v[j] - L.value(e[g], j);
          err += w[d0 + 8 * g + j] * diff * diff;
        }
      }
      if (err < best_err) {
        best_err = err, best_minus = m;
        std::copy(e, e + delta_values / 8, best_e);
      }
    }
    const float delta = best_minus ? -kDelta : kDelta;
    for (int g = 0; g < delta_values / 8; ++g) {
      entries[(d0 / 8) + g] = best_e[g], minus[(d0 / 8) + g] = best_minus;
      for (int j = 0; j < 8; ++j) {
        const int i = d0 + 8 * g + j;
        const float q = L.value(best_e[g], j) + delta;
        sumqx += w[i] * x[i] * q, sumq2 += w[i] * q * q;
      }
    }
  }
  s = sumq2 > 0 ? static_cast<float>(sumqx / sumq2) : 0.0f;
  return sumq2 > 0 && sumqx > 0 ? static_cast<float>(sumqx * sumqx / sumq2) : 0.0f;
}

// The best scale of one scale group, over trial scales from a quarter to twice the one that
// maps the largest value to the grid's top (+ delta).
float best_scale(const Lattice& L, const float* x, const float* w, int n, int delta_values) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax <= 0) return 0.0f;
  int entries[4];
  bool minus[4];
  float best = -1, best_s = 0;
  for (int k = -12; k <= 6; ++k) {
    float s = 0;
    const float id = (1.0f + kDelta) / amax * std::exp2(static_cast<float>(k) / 6.0f);
    const float metric = fit(L, x, w, n, delta_values, id, entries, minus, s);
    if (metric > best && s > 0) best = metric, best_s = s;
  }
  float s = 0;
  if (best_s > 0 && fit(L, x, w, n, delta_values, 1.0f / best_s, entries, minus, s) > best && s > 0)
    best_s = s;
  return best_s;
}

Iq1Block quantize_block(const Iq1Spec& spec, const float* x, const float* importance) {
  const Lattice& L = iq_lattice(IqGrid::IQ1S);
  float w[256];
  iq_block_weights(x, importance, w);
  const int n_scales = 256 / spec.scale_values;
  float s[16], smax = 0;
  for (int k = 0; k < n_scales; ++k) {
    s[k] = best_scale(L, x + k * spec.scale_values, w + k * spec.scale_values, spec.scale_values,
                      spec.delta_values);
    smax = std::max(smax, s[k]);
  }
  Iq1Block b;
  const float d = f16_to_f32(f32_to_f16(smax / 15.0f));  // scales d * (2l + 1), l in 0..7
  const int per_scale = spec.scale_values / 8;
  double xy = 0, xx = 0;
  for (int k = 0; k < n_scales; ++k) {
    const float ratio = d > 0 ? s[k] / d : 0.0f;
    b.scale[k] = std::clamp(static_cast<int>(std::lround((ratio - 1.0f) / 2.0f)), 0, 7);
    const float dl = d * static_cast<float>(2 * b.scale[k] + 1);
    float unused = 0;
    const int v0 = k * spec.scale_values;
    fit(L, x + v0, w + v0, spec.scale_values, spec.delta_values, dl > 0 ? 1.0f / dl : 0.0f,
        b.entry + k * per_scale, b.minus + k * per_scale, unused);
    for (int g = k * per_scale; g < (k + 1) * per_scale; ++g)
      for (int j = 0; j < 8; ++j) {
        const int i = 8 * g + j;
        const double y = dl * (L.value(b.entry[g], j) + (b.minus[g] ? -kDelta : kDelta));
        xy += w[i] * x[i] * y, xx += w[i] * x[i] * x[i];
      }
  }
  // As tensor/iq_quantize.cpp: the block keeps its weighted projection, sum(w x y) = sum(w x x).
  b.d = xy > 0 && xx > 0 ? static_cast<float>(d * xx / xy) : d;
  return b;
}

void pack_iq1_s(const Iq1Block& q, BlockIQ1_S& b) {
  b.d = f32_to_f16(q.d);
  for (int u = 0; u < 8; ++u) {
    uint16_t h = static_cast<uint16_t>(q.scale[u] << 12);
    if (q.minus[4 * u]) h |= 0x8000;
    for (int l = 0; l < 4; ++l) {
      b.qs[4 * u + l] = static_cast<uint8_t>(q.entry[4 * u + l]);
      h |= static_cast<uint16_t>(((q.entry[4 * u + l] >> 8) & 7) << (3 * l));
    }
    b.qh[u] = h;
  }
}

void pack_iq1_m(const Iq1Block& q, BlockIQ1_M& b) {
  std::memset(&b, 0, sizeof b);
  for (int g = 0; g < 32; ++g) {
    b.qs[g] = static_cast<uint8_t>(q.entry[g]);
    const int nibble = ((q.entry[g] >> 8) & 7) | (q.minus[g] ? 8 : 0);
    b.qh[g / 2] |= static_cast<uint8_t>(nibble << (4 * (g % 2)));
  }
  const uint16_t d = f32_to_f16(q.d);
  for (int i = 0; i < 4; ++i) {
    // Word i: units 2i and 2i + 1, each a scale for its values 0..15 and one for 16..31, and
    // nibble i of the f16 d on top.
    uint16_t word = static_cast<uint16_t>(((d >> (4 * i)) & 15) << 12);
    for (int h = 0; h < 4; ++h) word |= static_cast<uint16_t>(q.scale[4 * i + h] << (3 * h));
    b.scales[2 * i] = static_cast<uint8_t>(word & 255);
    b.scales[2 * i + 1] = static_cast<uint8_t>(word >> 8);
  }
}

}  // namespace

void quantize_row_iq1(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  if (type != DType::IQ1_S && type != DType::IQ1_M) fail("{} is not an IQ1 type", dtype_name(type));
  const Iq1Spec spec = type == DType::IQ1_S ? Iq1Spec{32, 32} : Iq1Spec{16, 8};
  for (int64_t b = 0; b < n / 256; ++b) {
    const Iq1Block q =
        quantize_block(spec, src + 256 * b, importance ? importance + 256 * b : nullptr);
    if (type == DType::IQ1_S)
      pack_iq1_s(q, static_cast<BlockIQ1_S*>(dst)[b]);
    else
      pack_iq1_m(q, static_cast<BlockIQ1_M*>(dst)[b]);
  }
}

}  // namespace strata
