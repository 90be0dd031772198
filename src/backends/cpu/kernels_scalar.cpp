// Plain scalar references: the definition of what every fast path must compute.
#include <algorithm>
#include <cmath>
#include <utility>

#include "backends/cpu/attention_exp.h"
#include "backends/cpu/kernels.h"
#include "tensor/column_groups.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

float dot_f32(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += f16_to_f32(w[i]) * x[i];
  return sum;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(w[i]) * x[i];
  return sum;
}

float dot_q8_0(const BlockQ8_0* w, const Q8Activation& xa, int64_t n) {
  const BlockQ8_0* x = xa.blocks;
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    int32_t acc = 0;
    for (int j = 0; j < kQK; ++j) acc += int32_t{w[b].qs[j]} * int32_t{x[b].qs[j]};
    sum += static_cast<float>(acc) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d));
  }
  return sum;
}

float dot_q4_0(const BlockQ4_0* w, const Q8Activation& xa, int64_t n) {
  const BlockQ8_0* x = xa.blocks;
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    int32_t acc = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      acc += ((w[b].qs[j] & 0x0f) - 8) * int32_t{x[b].qs[j]};
      acc += ((w[b].qs[j] >> 4) - 8) * int32_t{x[b].qs[j + kQK / 2]};
    }
    sum += static_cast<float>(acc) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d));
  }
  return sum;
}

void matvec_q4_0x16(const uint8_t* group, const Q8Activation& xa, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const uint8_t* q = interleaved_quants(group, nb);
  for (int r = 0; r < kInterleavedRows; ++r) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* x = xa.blocks[b].qs;
      int32_t acc = 0;
      for (int j = 0; j < 4; ++j)
        for (int m = 0; m < 4; ++m) {
          const uint8_t byte = q[((b * 4 + j) * kInterleavedRows + r) * 4 + m];
          acc += ((byte & 0x0f) - 8) * int32_t{x[4 * j + m]};
          acc += ((byte >> 4) - 8) * int32_t{x[16 + 4 * j + m]};
        }
      sum += static_cast<float>(acc) * (f16_to_f32(d[b * kInterleavedRows + r]) * xa.scale[b]);
    }
    out[r] = sum;
  }
}

void matmat_q4_0x16(const uint8_t* group, const Q8Activation* xs, int n_x, int64_t nb,
                    float* const* out) {
  for (int t = 0; t < n_x; ++t) matvec_q4_0x16(group, xs[t], nb, out[t]);
}

// Prompt-batch tiles: every pair as the single-vector reference computes it.
void matvec_q8_0x16(const uint8_t* group, const Q8Activation& xa, int64_t nb, float* out) {
  const uint16_t* d = interleaved_scales(group);
  const auto* q = reinterpret_cast<const int8_t*>(interleaved_quants(group, nb));
  for (int r = 0; r < kInterleavedRows; ++r) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* x = xa.blocks[b].qs;
      int32_t acc = 0;
      for (int j = 0; j < 8; ++j)
        for (int m = 0; m < 4; ++m)
          acc += int32_t{q[((b * 8 + j) * kInterleavedRows + r) * 4 + m]} * int32_t{x[4 * j + m]};
      sum += static_cast<float>(acc) * (f16_to_f32(d[b * kInterleavedRows + r]) * xa.scale[b]);
    }
    out[r] = sum;
  }
}

void matmat_q8_0x16(const uint8_t* group, const Q8Activation* xs, int n_x, int64_t nb,
                    float* const* out) {
  for (int t = 0; t < n_x; ++t) matvec_q8_0x16(group, xs[t], nb, out[t]);
}

void dot_f32_tile(const float* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                  int64_t n, float* out) {
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < n_x; ++t) out[r * n_x + t] = dot_f32(w + r * stride, x[t], n);
}

void dot_f16_tile(const uint16_t* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                  int64_t n, float* out) {
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < n_x; ++t) out[r * n_x + t] = dot_f16(w + r * stride, x[t], n);
}

void dot_bf16_tile(const uint16_t* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                   int64_t n, float* out) {
  for (int r = 0; r < n_rows; ++r)
    for (int t = 0; t < n_x; ++t) out[r * n_x + t] = dot_bf16(w + r * stride, x[t], n);
}

// The reference of the token-lane products: each (row, token) fused term by term in column
// order. Groups of 16 tokens, as the AVX-512 kernels take them (any width gives these bits).
constexpr int kScalarTokenLanes = 16;
float float_weight(DType type, const void* w, int64_t i) {
  if (type == DType::F32) return static_cast<const float*>(w)[i];
  const uint16_t h = static_cast<const uint16_t*>(w)[i];
  return type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void dot_float_lanes(DType type, const void* w, int64_t stride, int n_rows, const float* xt,
                     int n_groups, int64_t n, float* out) {
  const int64_t xs = static_cast<int64_t>(n_groups) * kScalarTokenLanes;
  for (int r = 0; r < n_rows; ++r)
    for (int64_t t = 0; t < xs; ++t) {
      float acc = 0.0f;
      for (int64_t k = 0; k < n; ++k)
        acc = std::fma(float_weight(type, w, r * stride + k), xt[k * xs + t], acc);
      out[r * xs + t] = acc;
    }
}

// Row by row: the reference order of the additions.
void axpy_f32(const float* const* w, const float* c, int n_rows, float* y, int64_t n,
              const void* const* /*next*/, int /*n_next*/) {
  for (int r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] += c[r] * w[r][i];
}

void axpy_f16(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n,
              const void* const* /*next*/, int /*n_next*/) {
  for (int r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] += c[r] * f16_to_f32(w[r][i]);
}

void axpy_bf16(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n,
               const void* const* /*next*/, int /*n_next*/) {
  for (int r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[i] += c[r] * bf16_to_f32(w[r][i]);
}

void axpy_q8_0(const BlockQ8_0* const* w, const float* c, int n_rows, float* y, int64_t n,
               const void* const* /*next*/, int /*n_next*/) {
  for (int r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < n / kQK; ++b) {
      const float s = c[r] * f16_to_f32(w[r][b].d);
      for (int j = 0; j < kQK; ++j) y[b * kQK + j] += s * static_cast<float>(w[r][b].qs[j]);
    }
}

void axpy_q4_0(const BlockQ4_0* const* w, const float* c, int n_rows, float* y, int64_t n,
               const void* const* /*next*/, int /*n_next*/) {
  for (int r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < n / kQK; ++b) {
      const float s = c[r] * f16_to_f32(w[r][b].d);
      for (int j = 0; j < kQK / 2; ++j) {
        y[b * kQK + j] += s * static_cast<float>((w[r][b].qs[j] & 0x0f) - 8);
        y[b * kQK + j + kQK / 2] += s * static_cast<float>((w[r][b].qs[j] >> 4) - 8);
      }
    }
}

void axpy_q8_0_group(const int8_t* const* rows, const int8_t* xq, int n_rows,
                     const uint16_t* scales, float dx, float* y, int64_t n,
                     const int8_t* const* /*next*/) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = column_group_position(i);
    int32_t sum = 0;
    for (int r = 0; r < n_rows; ++r) sum += static_cast<int32_t>(xq[r]) * rows[r][at];
    const float s = dx * f16_to_f32(scales[i]);
    y[i] += static_cast<float>(sum) * s;
  }
}

void axpy_q4_0_group(const uint8_t* const* rows, const int8_t* xq, int n_rows,
                     const uint16_t* scales, float dx, float* y, int64_t n,
                     const uint8_t* const* /*next*/) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t sum = 0;
    for (int r = 0; r < n_rows; ++r)
      sum += static_cast<int32_t>(xq[r]) * (column_group_quant(DType::Q4_0, rows[r], i) - 8);
    const float s = dx * f16_to_f32(scales[i]);
    y[i] += static_cast<float>(sum) * s;
  }
}

template <class Block>
void axpy_k_super(const KColumnTerms* groups, int n_groups, const uint16_t* d, const uint16_t* dmin,
                  float dx, float* y, int64_t n, const uint8_t* const* /*next*/) {
  using K = KQuant<Block>;
  if (n_groups <= 0) return;
  for (int64_t i = 0; i < n; ++i) {
    int32_t isum = 0, imin = 0;
    for (int g = 0; g < n_groups; ++g) {
      const KColumnTerms& t = groups[g];
      int32_t acc = 0;
      for (int r = 0; r < t.n_rows; ++r)
        acc += static_cast<int32_t>(t.xq[r]) * k_column_quant(K::type, t.rows[r], i);
      const int32_t scale = K::has_min ? t.sc[i] : static_cast<int8_t>(t.sc[i]);
      isum += scale * acc;
      imin += (K::has_min ? static_cast<int32_t>(t.m[i]) : K::offset * scale) * t.xsum;
    }
    const float m = K::has_min ? f16_to_f32(dmin[i]) : 0.0f;
    y[i] += superblock_dot<Block>(dx, f16_to_f32(d[i]), m, isum, imin);
  }
}

// The gather entries: the scalar code requests nothing ahead.
float gather_f32(const float* w, const float* x, int64_t n, const void*) {
  return dot_f32(w, x, n);
}
float gather_f16(const uint16_t* w, const float* x, int64_t n, const void*) {
  return dot_f16(w, x, n);
}
float gather_bf16(const uint16_t* w, const float* x, int64_t n, const void*) {
  return dot_bf16(w, x, n);
}
float gather_q8_0(const BlockQ8_0* w, const Q8Activation& x, int64_t n, const void*) {
  return dot_q8_0(w, x, n);
}
float gather_q4_0(const BlockQ4_0* w, const Q8Activation& x, int64_t n, const void*) {
  return dot_q4_0(w, x, n);
}

void dot4_q4_0(const BlockQ4_0* const* w, const Q8Activation& x, int64_t n, float* out,
               const void* const*, int) {
  for (int r = 0; r < 4; ++r) out[r] = dot_q4_0(w[r], x, n);
}

// K-quants: superblock_sums and kquant_value are the definitions (tensor/kquants.h).
template <class Block>
float dot_kquant(const void* wv, const BlockQ8_K* x, int64_t n) {
  using K = KQuant<Block>;
  const auto* w = static_cast<const Block*>(wv);
  float sum = 0.0f;
  for (int64_t s = 0; s < n / kQK_K; ++s) {
    int32_t isum, imin;
    superblock_sums(w[s], x[s], isum, imin);
    sum += superblock_dot<Block>(x[s].d, f16_to_f32(K::d_bits(w[s])),
                                 f16_to_f32(K::dmin_bits(w[s])), isum, imin);
  }
  return sum;
}

template <class Block>
float gather_kquant(const void* w, const BlockQ8_K* x, int64_t n, const void*) {
  return dot_kquant<Block>(w, x, n);
}

// The reference of the interleaved kernel: each row taken out and multiplied as dot_kquant.
void matvec_q4_Kx16(const uint8_t* group, const BlockQ8_K* x, int64_t nb, float* out) {
  std::vector<uint8_t> row(static_cast<size_t>(nb) * sizeof(BlockQ4_K));
  for (int r = 0; r < kInterleavedRows; ++r) {
    extract_row16(DType::Q4_K, group, nb * kQK_K, r, row.data());
    out[r] = dot_kquant<BlockQ4_K>(row.data(), x, nb * kQK_K);
  }
}

void matmat_q4_Kx16(const uint8_t* group, const BlockQ8_K* const* xs, int n_x, int64_t nb,
                    float* const* out) {
  for (int t = 0; t < n_x; ++t) matvec_q4_Kx16(group, xs[t], nb, out[t]);
}

void matmat_q6_K_rows16(const uint8_t* rows, uint64_t row_stride, const BlockQ8_K* const* xs,
                        int n_x, int64_t nb, float* const* out) {
  for (int r = 0; r < 16; ++r)
    for (int t = 0; t < n_x; ++t)
      out[t][r] = dot_kquant<BlockQ6_K>(rows + r * row_stride, xs[t], nb * kQK_K);
}

void attend_panel(const float* kt, const float* v, int64_t v_stride, int64_t hd, float scale,
                  float softcap, const AttentionRow* rows, int n_rows) {
  const float inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  for (int r = 0; r < n_rows; ++r) {
    const AttentionRow& row = rows[r];
    float e[kAttentionPanel];
    float m = *row.max;
    for (int p = row.lo; p < row.hi; ++p) {
      float s = 0.0f;
      for (int64_t d = 0; d < hd; ++d) s = std::fma(row.q[d], kt[d * kAttentionPanel + p], s);
      e[p] = s * scale;
      if (softcap > 0.0f) e[p] = attention_soft_cap(e[p], softcap, inv_cap);
      m = std::max(m, e[p]);
    }
    const float c = attention_exp(*row.max - m);
    for (int j = 0; j < kAttentionSumLanes; ++j) row.sum[j] = row.sum[j] * c;
    for (int p = 0; p < kAttentionPanel; ++p) {
      e[p] = p >= row.lo && p < row.hi ? attention_exp(e[p] - m) : 0.0f;
      row.sum[p % kAttentionSumLanes] += e[p];
    }
    for (int64_t d = 0; d < hd; ++d) {
      float o = row.out[d] * c;
      for (int p = row.lo; p < row.hi; ++p) o = std::fma(e[p], v[p * v_stride + d], o);
      row.out[d] = o;
    }
    *row.max = m;
  }
}

void load_panel(const void* src, bool f16, int64_t stride, int n_pos, int64_t hd, bool transpose,
                float* dst) {
  for (int p = 0; p < (transpose ? kAttentionPanel : n_pos); ++p)
    for (int64_t d = 0; d < hd; ++d) {
      const int64_t i = p * stride + d;
      const float x = p >= n_pos ? 0.0f
                      : f16  ? f16_to_f32(static_cast<const uint16_t*>(src)[i])
                             : static_cast<const float*>(src)[i];
      dst[transpose ? d * kAttentionPanel + p : p * hd + d] = x;
    }
}

volatile int64_t g_peak_sink = 0;

uint64_t int8_peak_loop(int64_t iterations) {
  constexpr int kChains = 8;
  int32_t acc[kChains] = {};
  int32_t u = 3, s = -5;
  for (int64_t i = 0; i < iterations; ++i) {
    asm volatile("" : "+r"(u), "+r"(s));
    for (auto& a : acc) a += u * s;
  }
  g_peak_sink = acc[0] + acc[kChains - 1];
  return static_cast<uint64_t>(iterations) * kChains;
}

uint64_t f32_peak_loop(int64_t iterations) {
  constexpr int kChains = 8;
  float acc[kChains] = {};
  float x = 1e-3f, y = 1e-3f;
  for (int64_t i = 0; i < iterations; ++i) {
    asm volatile("" : "+x"(x), "+x"(y));
    for (auto& a : acc) a += x * y;
  }
  g_peak_sink = static_cast<int64_t>(acc[0] + acc[kChains - 1]);
  return static_cast<uint64_t>(iterations) * kChains;
}

template <class Block>
void dot_kquant_multi(const void* w, const BlockQ8_K* const* x, int n_x, int64_t n, float* out) {
  for (int t = 0; t < n_x; ++t) out[t] = dot_kquant<Block>(w, x[t], n);
}

template <class Block>
void axpy_kquant(const void* const* w, const float* c, int n_rows, float* y, int64_t n,
                 const void* const* /*next*/, int /*n_next*/) {
  using K = KQuant<Block>;
  for (int r = 0; r < n_rows; ++r) {
    const auto* blocks = static_cast<const Block*>(w[r]);
    for (int64_t s = 0; s < n / kQK_K; ++s) {
      const Block& b = blocks[s];
      const float d = f16_to_f32(K::d_bits(b)), dmin = f16_to_f32(K::dmin_bits(b));
      for (int g = 0; g < kKGroups; ++g) {
        const int scale = K::scale(b, g), min = K::min(b, g);
        for (int i = 16 * g; i < 16 * (g + 1); ++i)
          y[s * kQK_K + i] += c[r] * kquant_value<Block>(d, dmin, scale, min, K::quant(b, i));
      }
    }
  }
}

#include "backends/cpu/kernels_scalar_units.inc"

}  // namespace

const CpuKernels& scalar_kernels() {
  static const CpuKernels k = with_unit_kernels(
      CpuKernels{.name = "scalar",
                 .dot_f32 = dot_f32,
                 .dot_f16 = dot_f16,
                 .dot_bf16 = dot_bf16,
                 .dot_q8_0 = dot_q8_0,
                 .dot_q4_0 = dot_q4_0,
                 .gather_dot_f32 = gather_f32,
                 .gather_dot_f16 = gather_f16,
                 .gather_dot_bf16 = gather_bf16,
                 .gather_dot_q8_0 = gather_q8_0,
                 .gather_dot_q4_0 = gather_q4_0,
                 .gather_dot4_q4_0 = dot4_q4_0,
                 .dot_f32_tile = dot_f32_tile,
                 .dot_f16_tile = dot_f16_tile,
                 .dot_bf16_tile = dot_bf16_tile,
                 .token_lanes = kScalarTokenLanes,
                 .dot_float_lanes = dot_float_lanes,
                 .matvec_q4_0x16 = matvec_q4_0x16,
                 .matvec_q8_0x16 = matvec_q8_0x16,
                 .matmat_q4_0x16 = matmat_q4_0x16,
                 .matmat_q8_0x16 = matmat_q8_0x16,
                 .int8_peak_loop = int8_peak_loop,
                 .f32_peak_loop = f32_peak_loop,
                 .attend_panel = attend_panel,
                 .load_panel = load_panel,
                 .quantize_q8_0 = quantize_row_q8_0_activations,
                 .axpy_f32 = axpy_f32,
                 .axpy_f16 = axpy_f16,
                 .axpy_bf16 = axpy_bf16,
                 .axpy_q8_0 = axpy_q8_0,
                 .axpy_q4_0 = axpy_q4_0,
                 .axpy_q8_0_group = axpy_q8_0_group,
                 .axpy_q4_0_group = axpy_q4_0_group,
                 .axpy_q4_K_super = axpy_k_super<BlockQ4_K>,
                 .axpy_q5_K_super = axpy_k_super<BlockQ5_K>,
                 .axpy_q6_K_super = axpy_k_super<BlockQ6_K>,
                 .axpy_q2_K_super = axpy_k_super<BlockQ2_K>,
                 .axpy_q3_K_super = axpy_k_super<BlockQ3_K>,
                 .dot_kq = {dot_kquant<BlockQ2_K>, dot_kquant<BlockQ3_K>, dot_kquant<BlockQ4_K>,
                            dot_kquant<BlockQ5_K>, dot_kquant<BlockQ6_K>},
                 .gather_dot_kq = {gather_kquant<BlockQ2_K>, gather_kquant<BlockQ3_K>,
                                   gather_kquant<BlockQ4_K>, gather_kquant<BlockQ5_K>,
                                   gather_kquant<BlockQ6_K>},
                 .dot_kq_multi = {dot_kquant_multi<BlockQ2_K>, dot_kquant_multi<BlockQ3_K>,
                                  dot_kquant_multi<BlockQ4_K>, dot_kquant_multi<BlockQ5_K>,
                                  dot_kquant_multi<BlockQ6_K>},
                 .matvec_q4_Kx16 = matvec_q4_Kx16,
                 .matmat_q4_Kx16 = matmat_q4_Kx16,
                 .matmat_q6_K_rows16 = matmat_q6_K_rows16,
                 .axpy_kq = {axpy_kquant<BlockQ2_K>, axpy_kquant<BlockQ3_K>, axpy_kquant<BlockQ4_K>,
                             axpy_kquant<BlockQ5_K>, axpy_kquant<BlockQ6_K>},
                 .dot_unit = {},
                 .gather_dot_unit = {},
                 .dot_unit_multi = {},
                 .axpy_unit = {},
                 .matvec_unit_x16 = {},
                 .matmat_unit_x16 = {}},
      std::make_index_sequence<kUnitTypes>());
  return k;
}

}  // namespace strata
