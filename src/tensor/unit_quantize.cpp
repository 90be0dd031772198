// Rows to and from the unit types (tensor/unit_quants.h). Dequantization is the traits' decode;
// the quantizers are strata's own: Q4_1, Q5_0, Q5_1, MXFP4, NVFP4, TQ1_0, TQ2_0, Q1_0 and Q2_0
// follow the rules of ggml's reference quantizers (so strata's files round as llama-quantize's
// do without an importance matrix), IQ4_NL and IQ4_XS search each block's scale for the least
// squared error.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/unit_quants.h"

namespace strata {

namespace {

template <DType T>
void dequantize_units(const void* src, float* dst, int64_t n) {
  const auto* row = static_cast<const uint8_t*>(src);
  for (int64_t u = 0; u < n / kUnitValues; ++u) row_unit_values<T>(row, u, dst + u * kUnitValues);
}

// The block's minimum and maximum.
void min_max(const float* x, int n, float& lo, float& hi) {
  lo = x[0], hi = x[0];
  for (int j = 1; j < n; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
}

// The value of largest magnitude, with its sign.
float signed_max(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  return max;
}

void quantize_q4_1(const float* x, BlockQ4_1& b) {
  float lo = 0, hi = 0;
  min_max(x, 32, lo, hi);
  const float d = (hi - lo) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d), b.m = f32_to_f16(lo);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int q1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// 32 five-bit quants into nibbles and fifth bits.
void pack_five_bits(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    h |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_max(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
  pack_five_bits(q, b.qs, b.qh);
}

void quantize_q5_1(const float* x, BlockQ5_1& b) {
  float lo = 0, hi = 0;
  min_max(x, 32, lo, hi);
  const float d = (hi - lo) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d), b.m = f32_to_f16(lo);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
  pack_five_bits(q, b.qs, b.qh);
}

// The index of the level (of 16, through `level`) nearest to v.
template <class Level>
int nearest_level(float v, Level level) {
  int best = 0;
  float best_err = INFINITY;
  for (int i = 0; i < 16; ++i) {
    const float e = std::fabs(v - static_cast<float>(level(i)));
    if (e < best_err) best_err = e, best = i;
  }
  return best;
}

void quantize_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  // The exponent that puts the largest value near the top level (6, doubled 12).
  b.e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
  const float d = e8m0_half(b.e);
  for (int j = 0; j < 16; ++j) {
    const int q0 = nearest_level(x[j] / d, fp4_level), q1 = nearest_level(x[j + 16] / d, fp4_level);
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// UE4M3 code of a positive scale, as ggml rounds it (ggml_fp32_to_ue4m3): the mantissa's top 3
// bits rounded up by the next one, subnormals to the nearest multiple of 2^-9, 448 at most.
uint8_t to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  x = std::min(x, 448.0f);
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int e = static_cast<int>((bits >> 23) & 0xFF) - 127 + 7;
  if (e <= 0) {
    const int m = std::min(static_cast<int>(x * 512.0f + 0.5f), 7);
    return m < 1 ? 0 : static_cast<uint8_t>(m);
  }
  if (e >= 15) return 0x7E;
  int m = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);
  if (m > 7) m = 0, ++e;
  return e >= 15 ? 0x7E : static_cast<uint8_t>((e << 3) | m);
}

// NVFP4 as ggml's reference quantizer: per 16 values the scale amax / 6 (the top E2M1 level),
// each value the level nearest it at that scale.
void quantize_nvfp4(const float* x, BlockNVFP4& b) {
  for (int g = 0; g < 4; ++g) {
    const float* v = x + 16 * g;
    float amax = 0;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(v[j]));
    b.d[g] = to_ue4m3(amax / 6.0f);
    const float d = ue4m3_half(b.d[g]);
    const auto nearest = [&](float value) {
      int best = 0;
      float best_err = std::fabs(static_cast<float>(fp4_level(0)) * d - value);
      for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(static_cast<float>(fp4_level(i)) * d - value);
        if (err < best_err) best = i, best_err = err;
      }
      return best;
    };
    for (int j = 0; j < 8; ++j)
      b.qs[8 * g + j] = static_cast<uint8_t>(nearest(v[j]) | (nearest(v[j + 8]) << 4));
  }
}

// IQ4_NL's best scale for 32 values: candidates around max / -127 (the extreme level), each
// refined by least squares for the levels it rounds to; the one with the least squared error.
float best_iq4_scale(const float* x) {
  const float max = signed_max(x, 32);
  if (max == 0.0f) return 0.0f;
  float best_d = max / -127.0f;
  double best_err = INFINITY;
  for (int step = -7; step <= 7; ++step) {
    const float d0 = max / (-127.0f + 2.0f * static_cast<float>(step));
    double sxl = 0, sll = 0;
    for (int j = 0; j < 32; ++j) {
      const float l = iq4nl_level(nearest_level(x[j] / d0, iq4nl_level));
      sxl += double{x[j]} * l, sll += double{l} * l;
    }
    const float d = sll > 0 ? static_cast<float>(sxl / sll) : d0;
    double err = 0;
    for (int j = 0; j < 32; ++j) {
      const double e = x[j] - double{d} * iq4nl_level(nearest_level(x[j] / d, iq4nl_level));
      err += e * e;
    }
    if (err < best_err) best_err = err, best_d = d;
  }
  return best_d;
}

// 32 values as IQ4_NL nibbles against the scale d (as stored).
void pack_iq4(const float* x, float d, uint8_t* qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int q0 = nearest_level(x[j] * id, iq4nl_level);
    const int q1 = nearest_level(x[j + 16] * id, iq4nl_level);
    qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL& b) {
  b.d = f32_to_f16(best_iq4_scale(x));
  pack_iq4(x, f16_to_f32(b.d), b.qs);
}

// IQ4_XS: each sub-block's best scale, then the eight scales as 6-bit multiples (-32..31) of a
// super-block scale d, and the values rounded against the scales as a reader decodes them.
void quantize_iq4_xs(const float* x, BlockIQ4_XS& b) {
  float s[8];
  for (int u = 0; u < 8; ++u) s[u] = best_iq4_scale(x + 32 * u);
  const float smax = signed_max(s, 8);
  const float d = smax / -32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof b.scales_l);
  for (int u = 0; u < 8; ++u) {
    const int l = std::clamp(static_cast<int>(std::lround(s[u] * id)), -32, 31) + 32;
    b.scales_l[u / 2] |= static_cast<uint8_t>((l & 15) << (4 * (u % 2)));
    b.scales_h |= static_cast<uint16_t>((l >> 4) << (2 * u));
    const float dl = f16_to_f32(b.d) * static_cast<float>(l - 32);
    pack_iq4(x + 32 * u, dl, b.qs + 16 * u);
  }
}

// The ternary and 1-/2-bit types, as ggml's reference quantizers round them: the scale is the
// block's largest magnitude (Q1_0: its mean magnitude), each value rounded half away from zero.
float abs_max(const float* x, int n) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}
// Five ternary digits (0..2, the first most significant; `n` < 5: zeros after) in a byte as ggml
// packs them, q * 256 / 243 rounded up, so that trit() reads digit k back.
uint8_t pack_trits(const int* t, int n) {
  int q = 0;
  for (int k = 0; k < 5; ++k) q = q * 3 + (k < n ? t[k] : 0);
  return static_cast<uint8_t>((q * 256 + 242) / 243);
}

void quantize_tq1_0(const float* x, BlockTQ1_0& b) {
  const float d = abs_max(x, 256), id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  auto digit = [&](int i) { return static_cast<int>(std::lround(x[i] * id)) + 1; };
  int t[5];
  for (int m = 0; m < 32; ++m) {  // values m + 32k
    for (int k = 0; k < 5; ++k) t[k] = digit(m + 32 * k);
    b.qs[m] = pack_trits(t, 5);
  }
  for (int m = 0; m < 16; ++m) {  // values 160 + m + 16k
    for (int k = 0; k < 5; ++k) t[k] = digit(160 + m + 16 * k);
    b.qs[32 + m] = pack_trits(t, 5);
  }
  for (int m = 0; m < 4; ++m) {  // values 240 + m + 4k, then a zero digit
    for (int k = 0; k < 4; ++k) t[k] = digit(240 + m + 4 * k);
    b.qh[m] = pack_trits(t, 4);
  }
}

void quantize_tq2_0(const float* x, BlockTQ2_0& b) {
  const float d = abs_max(x, 256), id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int c = 0; c < 2; ++c)
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int l = 0; l < 4; ++l)
        q |= static_cast<uint8_t>(((std::lround(x[128 * c + 32 * l + m] * id) + 1) & 3) << (2 * l));
      b.qs[32 * c + m] = q;
    }
}

void quantize_q1_0(const float* x, BlockQ1_0& b) {
  float sum = 0;
  for (int j = 0; j < 128; ++j) sum += std::fabs(x[j]);
  b.d = f32_to_f16(sum / 128.0f);
  std::memset(b.qs, 0, sizeof b.qs);
  for (int j = 0; j < 128; ++j)
    if (x[j] >= 0.0f) b.qs[j / 8] |= static_cast<uint8_t>(1u << (j % 8));
}

void quantize_q2_0(const float* x, BlockQ2_0& b) {
  const float d = abs_max(x, 64), id = d > 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  std::memset(b.qs, 0, sizeof b.qs);
  for (int j = 0; j < 64; ++j) {
    const int q = std::clamp(static_cast<int>(std::round(x[j] * id)) + 1, 0, 3);
    b.qs[j / 4] |= static_cast<uint8_t>(q << (2 * (j % 4)));
  }
}

template <class Block, void (*kQuantize)(const float*, Block&)>
void quantize_blocks(const float* src, void* dst, int64_t n, int values) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / values; ++b) kQuantize(src + b * values, blocks[b]);
}

}  // namespace

void dequantize_row_unit(DType type, const void* src, float* dst, int64_t n) {
  if (!is_unit_type(type)) fail("{} is not a unit type", dtype_name(type));
  with_unit_type(type, [&]<DType T>() { dequantize_units<T>(src, dst, n); });
}

bool has_unit_quantizer(DType type) {
  switch (type) {
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4:
    case DType::NVFP4:
    case DType::TQ1_0:
    case DType::TQ2_0:
    case DType::Q1_0:
    case DType::Q2_0:
      return true;
    default:
      return false;
  }
}

void quantize_row_unit(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::Q4_1:
      return quantize_blocks<BlockQ4_1, quantize_q4_1>(src, dst, n, 32);
    case DType::Q5_0:
      return quantize_blocks<BlockQ5_0, quantize_q5_0>(src, dst, n, 32);
    case DType::Q5_1:
      return quantize_blocks<BlockQ5_1, quantize_q5_1>(src, dst, n, 32);
    case DType::IQ4_NL:
      return quantize_blocks<BlockIQ4_NL, quantize_iq4_nl>(src, dst, n, 32);
    case DType::IQ4_XS:
      return quantize_blocks<BlockIQ4_XS, quantize_iq4_xs>(src, dst, n, 256);
    case DType::MXFP4:
      return quantize_blocks<BlockMXFP4, quantize_mxfp4>(src, dst, n, 32);
    case DType::NVFP4:
      return quantize_blocks<BlockNVFP4, quantize_nvfp4>(src, dst, n, 64);
    case DType::TQ1_0:
      return quantize_blocks<BlockTQ1_0, quantize_tq1_0>(src, dst, n, 256);
    case DType::TQ2_0:
      return quantize_blocks<BlockTQ2_0, quantize_tq2_0>(src, dst, n, 256);
    case DType::Q1_0:
      return quantize_blocks<BlockQ1_0, quantize_q1_0>(src, dst, n, 128);
    case DType::Q2_0:
      return quantize_blocks<BlockQ2_0, quantize_q2_0>(src, dst, n, 64);
    default:
      fail("strata cannot quantize to {}", dtype_name(type));
  }
}

}  // namespace strata
