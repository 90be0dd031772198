// Quantizers and dequantizers of the K-quant super-blocks (tensor/kquants.h).
//
// The quantizers are strata's own (GGUF fixes only the layout): each group's float scale (and
// min) is chosen by a small search over candidate scales, each refined by least squares for the
// quants it rounds to, keeping the candidate with the least squared error (each value's error
// weighted by its column's importance where an importance matrix is given: the expected square
// of the input it multiplies, so the error measured is the product's); then the group
// scales are themselves quantized against the super-block's d (and dmin) and the quants are
// rounded again with the scales as stored, so the error is measured against what a reader sees.
#include "tensor/kquants.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "tensor/half.h"

namespace strata {

namespace {

// Round half away from zero, as lround, without a library call (it was a tenth of the
// quantizers' time). Out-of-range values and NaN (degenerate fits, non-finite weights) are
// pinned first: converting them to int would be undefined; every caller clamps the result.
int nearest(float v) {
  if (!(v > -1e9f)) v = -1e9f;
  if (!(v < 1e9f)) v = 1e9f;
  return static_cast<int>(v + (v >= 0.0f ? 0.5f : -0.5f));
}

// Round half to even by adding 1.5 * 2^23 and reading the mantissa, as llama.cpp's nearest_int
// does (no library call; |v| <= 127 here, far inside the trick's 2^22 range).
int nearest_even(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits = 0;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// A group's asymmetric fit x ~ s * q - m with q in [0, nmax] and m >= 0 (the stored min is
// unsigned: the group's lowest value -m is never above 0, so min(x) is clamped to <= 0).
struct AsymFit {
  float scale = 0, min = 0;
};

// Value i's weight in a fit: its importance (llama-imatrix's mean squared input of its column)
// where the quantizer was given one, else 1.
double weight(const float* w, int i) {
  return w != nullptr ? double{w[i]} : 1.0;
}

// The (weighted) squared error of x ~ s * q - m with q rounded and clamped to [0, nmax].
double asym_error(const float* x, const float* w, int n, int nmax, float s, float m) {
  const float inv = 1.0f / s;
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = std::clamp(nearest((x[i] + m) * inv), 0, nmax);
    const double e = double{s} * q - m - x[i];
    err += weight(w, i) * e * e;
  }
  return err;
}

AsymFit fit_asymmetric(const float* x, const float* w, int n, int nmax) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.0f);
  if (hi <= lo) return {0.0f, -lo};
  AsymFit best{(hi - lo) / static_cast<float>(nmax), -lo};
  double best_err = asym_error(x, w, n, nmax, best.scale, best.min);
  for (int step = -2; step <= 3; ++step) {
    // Candidate: the range over nmax + step/4 levels, then least squares for its rounding.
    const float s0 = (hi - lo) / (static_cast<float>(nmax) + 0.25f * static_cast<float>(step));
    const float inv = 1.0f / s0;
    double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;  // weighted least squares
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest((x[i] - lo) * inv), 0, nmax);
      const double wi = weight(w, i);
      sw += wi, sq += wi * q, sqq += wi * q * q, sx += wi * x[i], sxq += wi * x[i] * q;
    }
    const double det = sw * sqq - sq * sq;
    if (det <= 0 || sw <= 0) continue;
    double ns = (sw * sxq - sx * sq) / det;
    double nm = (ns * sq - sx) / sw;
    if (nm < 0) nm = 0, ns = sqq > 0 ? sxq / sqq : 0;  // the lowest value must stay <= 0
    if (ns <= 0) continue;
    const float s = static_cast<float>(ns), m = static_cast<float>(nm);
    const double err = asym_error(x, w, n, nmax, s, m);
    if (err < best_err) best_err = err, best = {s, m};
  }
  return best;
}

// A group's symmetric fit x ~ s * q with q in [-nneg, npos]: candidates put the largest
// magnitude on the wider negative end (sign carried by s) or near it, each refined by least
// squares for its rounding.
float fit_symmetric(const float* x, const float* w, int n, int nneg, int npos) {
  float amax = 0, peak = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), peak = x[i];
  if (amax == 0) return 0;
  float best = peak / -static_cast<float>(nneg);
  double best_err = -1;
  for (int step = -2; step <= 2; ++step) {
    const float s0 = peak / -(static_cast<float>(nneg) + 0.25f * static_cast<float>(step));
    const float inv0 = 1.0f / s0;
    double sxq = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest(x[i] * inv0), -nneg, npos);
      const double wi = weight(w, i);
      sxq += wi * x[i] * q, sqq += wi * q * q;
    }
    const float s = sqq > 0 ? static_cast<float>(sxq / sqq) : s0;
    const float inv = 1.0f / s;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = double{s} * std::clamp(nearest(x[i] * inv), -nneg, npos) - x[i];
      err += weight(w, i) * e * e;
    }
    if (best_err < 0 || err < best_err) best_err = err, best = s;
  }
  return best;
}

// Integer levels of per-group values v (>= 0 for unsigned, any sign for signed) against one
// super-block scale: returns the f16-rounded scale, writes the levels.
template <int kGroups>
float quantize_scales(const float* v, int max_level, bool is_signed, int* levels) {
  float amax = 0;
  for (int g = 0; g < kGroups; ++g) amax = std::max(amax, std::fabs(v[g]));
  const float d = f16_to_f32(f32_to_f16(amax / static_cast<float>(max_level)));
  for (int g = 0; g < kGroups; ++g) {
    const int lvl = d > 0 ? nearest(v[g] / d) : 0;
    levels[g] = std::clamp(lvl, is_signed ? -max_level : 0, max_level);
  }
  return d;
}

// Q4_K/Q5_K's 12 bytes of eight 6-bit scales and mins (see k4_scale_or_min).
void pack_k4_scales(const int* sc, const int* mn, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

// Asymmetric types: groups of `group` values, scale/min levels up to max_level.
// Returns d and dmin; writes the quants' final values into q (index = element).
template <int kGroups>
void quantize_asymmetric(const float* x, const float* w, int nmax, int max_level, float& d,
                         float& dmin, int* sc, int* mn, int* q) {
  constexpr int kGroup = kQK_K / kGroups;
  float s[kGroups], m[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    const AsymFit f = fit_asymmetric(x + g * kGroup, w ? w + g * kGroup : nullptr, kGroup, nmax);
    s[g] = f.scale, m[g] = f.min;
  }
  d = quantize_scales<kGroups>(s, max_level, false, sc);
  dmin = quantize_scales<kGroups>(m, max_level, false, mn);
  for (int g = 0; g < kGroups; ++g) {
    const float dl = d * static_cast<float>(sc[g]), ml = dmin * static_cast<float>(mn[g]);
    for (int i = g * kGroup; i < (g + 1) * kGroup; ++i)
      q[i] = dl > 0 ? std::clamp(nearest((x[i] + ml) / dl), 0, nmax) : 0;
  }
}

// Symmetric types: groups of 16, values in [-nneg, npos], signed scale levels.
void quantize_symmetric(const float* x, const float* w, int nneg, int npos, int max_level, float& d,
                        int* sc, int* q) {
  float s[kKGroups];
  for (int g = 0; g < kKGroups; ++g)
    s[g] = fit_symmetric(x + 16 * g, w ? w + 16 * g : nullptr, 16, nneg, npos);
  d = quantize_scales<kKGroups>(s, max_level, true, sc);
  for (int g = 0; g < kKGroups; ++g) {
    const float dl = d * static_cast<float>(sc[g]);
    for (int i = 16 * g; i < 16 * (g + 1); ++i)
      q[i] = dl != 0 ? std::clamp(nearest(x[i] / dl), -nneg, npos) : 0;
  }
}

void quantize_q2_K(const float* x, const float* w, BlockQ2_K& b) {
  float d, dmin;
  int sc[16], mn[16], q[kQK_K];
  quantize_asymmetric<16>(x, w, 3, 15, d, dmin, sc, mn, q);
  b.d = f32_to_f16(d), b.dmin = f32_to_f16(dmin);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(sc[g] | (mn[g] << 4));
  std::memset(b.qs, 0, sizeof b.qs);
  for (int i = 0; i < kQK_K; ++i)
    b.qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>(q[i] << (2 * ((i / 32) % 4)));
}

void quantize_q3_K(const float* x, const float* w, BlockQ3_K& b) {
  float d;
  int sc[16], q[kQK_K];
  quantize_symmetric(x, w, 4, 3, 31, d, sc, q);
  b.d = f32_to_f16(d);
  std::memset(b.scales, 0, sizeof b.scales);
  for (int g = 0; g < 16; ++g) {
    const int s = sc[g] + 32;  // 1..63
    if (g < 8)
      b.scales[g] |= static_cast<uint8_t>(s & 15);
    else
      b.scales[g - 8] |= static_cast<uint8_t>((s & 15) << 4);
    b.scales[8 + g % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (g / 4)));
  }
  std::memset(b.qs, 0, sizeof b.qs);
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int i = 0; i < kQK_K; ++i) {
    const int u = q[i] + 4;  // 0..7
    b.qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((u & 3) << (2 * ((i / 32) % 4)));
    if (u & 4) b.hmask[i % 32] |= static_cast<uint8_t>(1 << (4 * (i / 128) + (i / 32) % 4));
  }
}

template <class Block>
void quantize_k4_or_k5(const float* x, const float* w, Block& b, int nmax) {
  float d, dmin;
  int sc[8], mn[8], q[kQK_K];
  quantize_asymmetric<8>(x, w, nmax, 63, d, dmin, sc, mn, q);
  b.d = f32_to_f16(d), b.dmin = f32_to_f16(dmin);
  pack_k4_scales(sc, mn, b.scales);
  std::memset(b.qs, 0, sizeof b.qs);
  for (int i = 0; i < kQK_K; ++i) {
    const int shift = (i % 64) < 32 ? 0 : 4;
    b.qs[32 * (i / 64) + i % 32] |= static_cast<uint8_t>((q[i] & 15) << shift);
  }
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    std::memset(b.qh, 0, sizeof b.qh);
    for (int i = 0; i < kQK_K; ++i)
      if (q[i] & 16) b.qh[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
  }
}

void quantize_q6_K(const float* x, const float* w, BlockQ6_K& b) {
  float d;
  int sc[16], q[kQK_K];
  quantize_symmetric(x, w, 32, 31, 127, d, sc, q);
  b.d = f32_to_f16(d);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(sc[g]);
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int i = 0; i < kQK_K; ++i) {
    const int u = q[i] + 32, n = i / 128, k = (i / 32) % 4, l = i % 32;
    b.ql[64 * n + l + 32 * (k % 2)] |= static_cast<uint8_t>((u & 15) << (k < 2 ? 0 : 4));
    b.qh[32 * n + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
  }
}

template <class Block>
void dequantize_blocks(const Block* blocks, float* y, int64_t n) {
  using K = KQuant<Block>;
  for (int64_t s = 0; s < n / kQK_K; ++s) {
    const Block& b = blocks[s];
    const float d = f16_to_f32(K::d_bits(b)), dmin = f16_to_f32(K::dmin_bits(b));
    for (int g = 0; g < kKGroups; ++g) {
      const int scale = K::scale(b, g), min = K::min(b, g);
      for (int i = 16 * g; i < 16 * (g + 1); ++i)
        y[s * kQK_K + i] = kquant_value<Block>(d, dmin, scale, min, K::quant(b, i));
    }
  }
}

template <class Block, class F>
void quantize_blocks(const float* x, const float* w, void* dst, int64_t n, F quantize_one) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t s = 0; s < n / kQK_K; ++s)
    quantize_one(x + s * kQK_K, w != nullptr ? w + s * kQK_K : nullptr, blocks[s]);
}

}  // namespace

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  // Bit for bit as llama.cpp's x86 CPU quantizes activations for its K-quant products
  // (quantize_row_q8_K_ref): the scale from the value of largest magnitude (the first of equal
  // ones) with its sign, iscale = -127 / max, round half to even, at most 127; so both engines
  // compute the same integer products on the same file (their perplexities then agree to the
  // float sums' order).
  for (int64_t s = 0; s < n / kQK_K; ++s) {
    const float* v = x + s * kQK_K;
    float amax = 0, max = 0;
    for (int i = 0; i < kQK_K; ++i)
      if (std::fabs(v[i]) > amax) amax = std::fabs(v[i]), max = v[i];
    if (!(amax > 0)) {  // all zero (or NaN: nothing sensible to scale by)
      y[s] = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.0f / max;
    y[s].d = 1.0f / iscale;
    for (int g = 0; g < kKGroups; ++g) {
      int sum = 0;
      for (int i = 16 * g; i < 16 * (g + 1); ++i) {
        const int q = std::min(nearest_even(iscale * v[i]), 127);
        y[s].qs[i] = static_cast<int8_t>(q);
        sum += q;
      }
      y[s].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

void quantize_row_kquant(DType type, const float* x, void* dst, int64_t n, const float* w) {
  switch (type) {
    case DType::Q2_K:
      return quantize_blocks<BlockQ2_K>(x, w, dst, n, quantize_q2_K);
    case DType::Q3_K:
      return quantize_blocks<BlockQ3_K>(x, w, dst, n, quantize_q3_K);
    case DType::Q4_K:
      return quantize_blocks<BlockQ4_K>(
          x, w, dst, n,
          [](const float* v, const float* vw, BlockQ4_K& b) { quantize_k4_or_k5(v, vw, b, 15); });
    case DType::Q5_K:
      return quantize_blocks<BlockQ5_K>(
          x, w, dst, n,
          [](const float* v, const float* vw, BlockQ5_K& b) { quantize_k4_or_k5(v, vw, b, 31); });
    case DType::Q6_K:
      return quantize_blocks<BlockQ6_K>(x, w, dst, n, quantize_q6_K);
    case DType::Q8_K:
      return quantize_row_q8_K(x, static_cast<BlockQ8_K*>(dst), n);
    default:
      fail("{} is not a K-quant type", dtype_name(type));
  }
}

void dequantize_row_kquant(DType type, const void* src, float* y, int64_t n) {
  switch (type) {
    case DType::Q2_K:
      return dequantize_blocks(static_cast<const BlockQ2_K*>(src), y, n);
    case DType::Q3_K:
      return dequantize_blocks(static_cast<const BlockQ3_K*>(src), y, n);
    case DType::Q4_K:
      return dequantize_blocks(static_cast<const BlockQ4_K*>(src), y, n);
    case DType::Q5_K:
      return dequantize_blocks(static_cast<const BlockQ5_K*>(src), y, n);
    case DType::Q6_K:
      return dequantize_blocks(static_cast<const BlockQ6_K*>(src), y, n);
    case DType::Q8_K: {
      const auto* b = static_cast<const BlockQ8_K*>(src);
      for (int64_t s = 0; s < n / kQK_K; ++s)
        for (int i = 0; i < kQK_K; ++i) y[s * kQK_K + i] = b[s].d * static_cast<float>(b[s].qs[i]);
      return;
    }
    default:
      fail("{} is not a K-quant type", dtype_name(type));
  }
}

}  // namespace strata
