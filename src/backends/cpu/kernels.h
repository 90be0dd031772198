// The CPU kernel table. Every entry has a plain scalar reference (kernels_scalar.cpp); SIMD
// variants implement the same functions and are chosen once at run time from the CPU's
// features (dispatch.cpp). Setting STRATA_CPU=scalar|avx2|avx512vnni forces a variant. Each SIMD
// variant comes with two read-aheads for its column products (read_ahead.h), chosen by the CPU's
// identity or STRATA_READ_AHEAD=far|near; they give the same bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/read_ahead.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tensor/kquants.h"
#include "tensor/unit_quants.h"

namespace strata {

// The activation vector quantized to Q8_0 for products with Q8_0/Q4_0 weights, with the
// per-block values fast kernels would otherwise recompute for every row.
struct Q8Activation {
  const BlockQ8_0* blocks;
  const float* scale;          // f32 value of blocks[b].d
  const float* scaled_sum;     // scale[b] * sum(blocks[b].qs): for Q4_0's offset of 8
  const int32_t* minus_8_sum;  // -8 * sum(blocks[b].qs): Q4_0's offset as an integer
  // 8 per block: scaled_sum[b] four times, then 16 * scaled_sum[b] four times: the VNNI Q4_0
  // kernel's per-lane offsets (its upper lanes hold high nibbles unshifted, i.e. times 16).
  const float* q4_lane_offsets;
  // The quants of all blocks back to back (n int8), and scale[b] eight times per block: the
  // 512-bit Q4_0 kernel reads two blocks' activations and per-lane scales with one load each.
  const int8_t* qs;
  const float* lane_scale;
  // f16(d * sum(blocks[b].qs)) with d = max|x| / 127 before its rounding to f16: the sum as
  // llama.cpp's Q8_1 activation stores it, which Q4_1/Q5_1's offset term multiplies.
  const float* q8_1_sum;
  // The quants plus 128 as unsigned bytes (qs ^ 0x80), all blocks back to back: the VNNI Q8_0
  // batch kernels' unsigned operand, made once per token instead of once per row group.
  const uint8_t* qs_biased;
};

// What a unit-type product reads (tensor/unit_quants.h): the activation's Q8_0 blocks, or for the
// types whose kInput is Q8_K its super-blocks.
struct UnitInput {
  const Q8Activation* q8;
  const BlockQ8_K* q8k;
};

// Attention's unit of the cache: positions per panel (attend_panel), and the partial sums a
// query row keeps of its softmax's exponentials (one per position modulo 16).
inline constexpr int kAttentionPanel = 64;
inline constexpr int kAttentionSumLanes = 16;

// One query row of attend_panel: its head's query, its running (unnormalised) output and
// softmax state, and the panel positions it sees, [lo, hi).
struct AttentionRow {
  const float* q;  // hd elements
  float* out;      // hd elements
  float* max;      // the largest score so far (-inf before the first panel)
  float* sum;      // kAttentionSumLanes partial sums
  int lo, hi;
};

// Activations per call of the multi-token group kernels.
inline constexpr int kGroupTokens = 8;

struct CpuKernels {
  const char* name;  // the instruction set: scalar, avx2, avx512vnni
  // How the axpy_f32/_f16/_bf16, axpy_q8_0_group and axpy_q4_0_group kernels read rows ahead
  // (read_ahead.h;
  // the scalar kernels read none).
  ColumnReadAhead read_ahead = ColumnReadAhead::Far;
  // Dot products of one weight row with the activation vector, n elements. Q8_0 and Q4_0
  // rows are multiplied with the activation quantized to Q8_0 blocks.
  float (*dot_f32)(const float* w, const float* x, int64_t n);
  float (*dot_f16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_bf16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_q8_0)(const BlockQ8_0* w, const Q8Activation& x, int64_t n);
  float (*dot_q4_0)(const BlockQ4_0* w, const Q8Activation& x, int64_t n);
  // The same products for rows read out of order (the sparse gather): no prefetching past the
  // row's end, where a dense product's next row would be; instead `next` (may be null), the
  // caller's next row, has its lines requested as this row's are consumed (at the same byte
  // offsets; all at once they would stall on full miss buffers). Same arithmetic as dot_*.
  float (*gather_dot_f32)(const float* w, const float* x, int64_t n, const void* next);
  float (*gather_dot_f16)(const uint16_t* w, const float* x, int64_t n, const void* next);
  float (*gather_dot_bf16)(const uint16_t* w, const float* x, int64_t n, const void* next);
  float (*gather_dot_q8_0)(const BlockQ8_0* w, const Q8Activation& x, int64_t n, const void* next);
  float (*gather_dot_q4_0)(const BlockQ4_0* w, const Q8Activation& x, int64_t n, const void* next);
  // Four such Q4_0 rows at once, out[0..3], each equal to gather_dot_q4_0 of that row bit for
  // bit: fast variants load the activation once for all four. `next` (n_next rows of n
  // elements, may be 0) are the caller's next rows: fast variants request their lines a few at a
  // time while they work, instead of all at once (which stalls on full miss buffers).
  void (*gather_dot4_q4_0)(const BlockQ4_0* const* w, const Q8Activation& x, int64_t n, float* out,
                           const void* const* next, int n_next);
  // Prompt batches: n_rows weight rows (`stride` elements apart) times n_x activation vectors,
  // out[r * n_x + t] = w_r . x_t. Fast variants use register tiles of rows x vectors (each
  // weight chunk converted once per tile of vectors), so their sums are split over lanes
  // differently from the single-vector kernels': equal within rounding, and the same whatever
  // the batch size or thread count.
  void (*dot_f32_tile)(const float* w, int64_t stride, int n_rows, const float* const* x, int n_x,
                       int64_t n, float* out);
  void (*dot_f16_tile)(const uint16_t* w, int64_t stride, int n_rows, const float* const* x,
                       int n_x, int64_t n, float* out);
  void (*dot_bf16_tile)(const uint16_t* w, int64_t stride, int n_rows, const float* const* x,
                        int n_x, int64_t n, float* out);
  // Prompt batches of float weights (F32, F16, BF16) with a lane per token, for batches of at
  // least `token_lanes` tokens: n_rows <= 16 rows (`stride` elements apart) times activations
  // stored by column in groups of token_lanes tokens (token t's element k at
  // xt[k * n_groups * token_lanes + t], token_lanes.h), out[r * n_groups * token_lanes + t].
  // Every product is the fused sum of its terms in column order from zero, in every variant:
  // equal to the scalar reference bit for bit, whatever the batch or thread count.
  int token_lanes;
  void (*dot_float_lanes)(DType type, const void* w, int64_t stride, int n_rows, const float* xt,
                          int n_groups, int64_t n, float* out);
  // One group of 16 interleaved rows (tensor/interleaved_rows.h) times the activation:
  // out[0..15]. Each row's blocks are summed in order exactly as the scalar dot_q4_0 / dot_q8_0
  // sum them (integer block sum, times d_w * d_x, added to the running sum without fusing), so
  // every variant equals the scalar reference bit for bit.
  void (*matvec_q4_0x16)(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out);
  void (*matvec_q8_0x16)(const uint8_t* group, const Q8Activation& x, int64_t nb, float* out);
  // The Q4_0 (Q8_0) group times n_x <= kGroupTokens activations at once: out[t][0..15] is
  // matvec_q4_0x16 (matvec_q8_0x16) of xs[t] bit for bit. Fast variants unpack each block's nibbles
  // once for all of them (a batched decode step or a prompt reads the group from cache n_x times
  // less).
  void (*matmat_q4_0x16)(const uint8_t* group, const Q8Activation* xs, int n_x, int64_t nb,
                         float* const* out);
  void (*matmat_q8_0x16)(const uint8_t* group, const Q8Activation* xs, int n_x, int64_t nb,
                         float* const* out);
  // Peak-rate loops, for `strata bench`'s compute limit: `iterations` rounds of independent
  // multiply-adds with the instructions the kernels multiply with (int8: maddubs + madd on AVX2,
  // vpdpbusd on 512-bit registers with VNNI; float: FMA on the widest registers); each returns
  // the multiply-adds it performed.
  uint64_t (*int8_peak_loop)(int64_t iterations);
  uint64_t (*f32_peak_loop)(int64_t iterations);
  // Attention, a panel of kAttentionPanel cached positions at a time (backends/cpu/attention.h),
  // an online softmax over the panels. `kt`: the panel's keys transposed, kt[d * kAttentionPanel
  // + p]; `v`: its values, v[p * v_stride + d]. For each row: s_p = (fused q[d] * kt[d][p] summed
  // over d in order) * scale for p in [lo, hi), then attention_soft_cap(s_p) when softcap > 0;
  // m = max(*max, every s_p); c = attention_exp(*max
  // - m); sum[j] = sum[j] * c, then e_p = attention_exp(s_p - m) of p = j, j + 16, j + 32, j + 48
  // (0 outside [lo, hi)) added in that order; out[d] = out[d] * c, then e_p * v[p][d] fused in
  // position order; *max = m. Every step one operation, so every variant gives the scalar bits.
  void (*attend_panel)(const float* kt, const float* v, int64_t v_stride, int64_t hd, float scale,
                       float softcap, const AttentionRow* rows, int n_rows);
  // n_pos <= kAttentionPanel cached rows (`stride` elements apart, F32 or F16) as F32: transposed,
  // dst[d * kAttentionPanel + p], the positions from n_pos on 0; or not, dst[p * hd + d].
  void (*load_panel)(const void* src, bool f16, int64_t stride, int n_pos, int64_t hd,
                     bool transpose, float* dst);
  // Quantizes the activation once per matrix product.
  void (*quantize_q8_0)(const float* x, BlockQ8_0* y, int64_t n);
  // y[i] += c[0] * w[0][i] + c[1] * w[1][i] + ... for n elements of n_rows weight rows
  // (n a multiple of 32 for Q8_0/Q4_0), added one row after the other: the neuron-aware down
  // projection adds each active neuron's row of ffn_down_t scaled by its activation. Several
  // rows per call keep y in registers across them (one load/store of y per group, not per
  // row); the additions happen in the same order as one row at a time. Element-wise, so an
  // element's result does not depend on where a slice starts (slices start at multiples of 32).
  // `next` (n_next rows, may be 0) are the rows of the caller's next call, at the same offset:
  // fast variants prefetch them while they work (rows are short and scattered, so prefetching
  // ahead inside a row would mostly fetch what is never used).
  void (*axpy_f32)(const float* const* w, const float* c, int n_rows, float* y, int64_t n,
                   const void* const* next, int n_next);
  void (*axpy_f16)(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n,
                   const void* const* next, int n_next);
  void (*axpy_bf16)(const uint16_t* const* w, const float* c, int n_rows, float* y, int64_t n,
                    const void* const* next, int n_next);
  void (*axpy_q8_0)(const BlockQ8_0* const* w, const float* c, int n_rows, float* y, int64_t n,
                    const void* const* next, int n_next);
  void (*axpy_q4_0)(const BlockQ4_0* const* w, const float* c, int n_rows, float* y, int64_t n,
                    const void* const* next, int n_next);
  // Input-sparse products through a Q8_0 column-group copy (tensor/column_groups.h), one group
  // of 32 inputs: y[i] += float(sum over r of xq[r] * rows[r][column_group_position(i)]) *
  // (dx * f16(scales[i])) for i in [0, n) (n a multiple of 64), rows: the group's n_rows
  // (<= 32) kept inputs' values, xq their values of the input quantized as the dense product
  // quantizes it (quantize_q8_0), dx its scale. The integer sum is exact and the float steps are
  // as written, so every variant equals the scalar one bit for bit. `next` (null, or 8 rows):
  // the first rows of the caller's next call (the first repeated if fewer), requested meanwhile.
  void (*axpy_q8_0_group)(const int8_t* const* rows, const int8_t* xq, int n_rows,
                          const uint16_t* scales, float dx, float* y, int64_t n,
                          const int8_t* const* next);
  // The same through a Q4_0 copy: rows[r][column_group_position(i)] replaced by the row's 4-bit
  // quant q of output i (column_group_quant) minus 8, the file's Q4_0 weight over its scale.
  void (*axpy_q4_0_group)(const uint8_t* const* rows, const int8_t* xq, int n_rows,
                          const uint16_t* scales, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  // The same through a Q4_K (Q5_K, Q6_K) copy, one super-block of 256 inputs: its groups (of 32;
  // Q6_K 16 inputs) that have kept rows, the input quantized as the dense product quantizes it
  // (quantize_row_q8_K of the super-block, dx its scale). With acc_g[i] the sum over group g's
  // rows r of xq[r] * k_column_quant(rows[r], i), isum[i] = sum over g of sc_g[i] * acc_g[i]
  // and imin[i] = sum over g of m_g[i] * xsum_g (Q6_K: 32 * sc_g[i] * xsum_g): superblock_sums'
  // integers, exact; then y[i] += superblock_dot(dx, f16(d[i]), f16(dmin[i]), isum, imin): the
  // dense product's float steps, so the products equal the row-major kernels' bit for bit.
  void (*axpy_q4_K_super)(const KColumnTerms* groups, int n_groups, const uint16_t* d,
                          const uint16_t* dmin, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  void (*axpy_q5_K_super)(const KColumnTerms* groups, int n_groups, const uint16_t* d,
                          const uint16_t* dmin, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  void (*axpy_q6_K_super)(const KColumnTerms* groups, int n_groups, const uint16_t* d,
                          const uint16_t* dmin, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  // Q2_K (with mins, as Q4_K) and Q3_K (offset 4: imin = 4 * sc_g[i] * xsum_g, as Q6_K's 32).
  void (*axpy_q2_K_super)(const KColumnTerms* groups, int n_groups, const uint16_t* d,
                          const uint16_t* dmin, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  void (*axpy_q3_K_super)(const KColumnTerms* groups, int n_groups, const uint16_t* d,
                          const uint16_t* dmin, float dx, float* y, int64_t n,
                          const uint8_t* const* next);
  // K-quants (tensor/kquants.h), one entry per type at kquant_slot(type): Q2_K..Q6_K.
  // A row of n values (a multiple of 256) times the activation quantized to Q8_K: each
  // super-block's integer sums exactly as superblock_sums, then superblock_dot, added in block
  // order, so every variant equals the scalar reference bit for bit. The gather entries, as
  // gather_dot_*, prefetch nothing past the row but request `next` (may be null) block by block.
  float (*dot_kq[kKQuantTypes])(const void* w, const BlockQ8_K* x, int64_t n);
  float (*gather_dot_kq[kKQuantTypes])(const void* w, const BlockQ8_K* x, int64_t n,
                                       const void* next);
  // One row times n_x activations (prompt batches): out[t] equals dot_kq of x[t] bit for bit;
  // fast variants unpack each super-block once for all of them.
  void (*dot_kq_multi[kKQuantTypes])(const void* w, const BlockQ8_K* const* x, int n_x, int64_t n,
                                     float* out);
  // One group of 16 interleaved Q4_K rows (tensor/interleaved_rows.h) times the activation:
  // out[0..15], each equal to dot_kq of the plain row bit for bit (the same integer sums and the
  // same float steps per super-block, lane by lane).
  void (*matvec_q4_Kx16)(const uint8_t* group, const BlockQ8_K* x, int64_t nb, float* out);
  // The group times n_x <= kGroupTokens activations: out[t][0..15] is matvec_q4_Kx16 of xs[t]
  // bit for bit; fast variants unpack each super-block's scales and nibbles once for several.
  void (*matmat_q4_Kx16)(const uint8_t* group, const BlockQ8_K* const* xs, int n_x, int64_t nb,
                         float* const* out);
  // 16 Q6_K rows in the file's layout (`row_stride` bytes apart, nb super-blocks each) times
  // n_x activations: out[t][r] equals dot_kq of row r and xs[t] bit for bit. The VNNI variant
  // repacks the rows once per call (16 rows to a 512-bit register), so a call takes a batch.
  // Null in a CPU backend without repacking (--no-repack): the rows go one at a time.
  void (*matmat_q6_K_rows16)(const uint8_t* rows, uint64_t row_stride, const BlockQ8_K* const* xs,
                             int n_x, int64_t nb, float* const* out);
  // The axpy above for K-quant rows (n a multiple of 256): y[i] += c[r] * kquant_value(...)
  // row after row, so equal to the scalar reference bit for bit.
  void (*axpy_kq[kKQuantTypes])(const void* const* w, const float* c, int n_rows, float* y,
                                int64_t n, const void* const* next, int n_next);

  // Unit types (tensor/unit_quants.h: Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0,
  // Q1_0, Q2_0), one entry per type at unit_slot(type); rows are raw bytes. A row of n values
  // (a multiple of the type's block) times the activation in the type's form: per unit (Q8_0
  // types) or super-block (Q8_K types) the exact integer sum, unit_term / unit_k_term, added
  // into chain i % 4, the chains summed by sum_chains, so every variant equals the scalar
  // reference bit for bit. gather_dot_unit requests `next` (may be null) as it goes and nothing
  // past the row; dot_unit_multi is dot_unit for n_x activations, each unit decoded once;
  // axpy_unit adds c[r] * unit_value row after row, as axpy_kq.
  float (*dot_unit[kUnitTypes])(const uint8_t* w, const UnitInput& x, int64_t n);
  float (*gather_dot_unit[kUnitTypes])(const uint8_t* w, const UnitInput& x, int64_t n,
                                       const void* next);
  void (*dot_unit_multi[kUnitTypes])(const uint8_t* w, const UnitInput* x, int n_x, int64_t n,
                                     float* out);
  void (*axpy_unit[kUnitTypes])(const void* const* w, const float* c, int n_rows, float* y,
                                int64_t n, const void* const* next, int n_next);
  // One group of 16 interleaved rows of a nibble unit type (tensor/interleaved_rows.h; null for
  // the other unit types) times the activation, nb blocks of the type per row: out[0..15], each
  // equal to dot_unit of the plain row bit for bit (the same integer sums and unit terms, lane
  // by lane, into the same chains).
  void (*matvec_unit_x16[kUnitTypes])(const uint8_t* group, const UnitInput& x, int64_t nb,
                                      float* out);
  // The group times n_x <= kGroupTokens activations: out[t][0..15] is matvec_unit_x16 of xs[t]
  // bit for bit; fast variants decode each block once for all of them.
  void (*matmat_unit_x16[kUnitTypes])(const uint8_t* group, const UnitInput* xs, int n_x,
                                      int64_t nb, float* const* out);

  // The axpy_q*_K_super entry of a K-quant type (Q2_K..Q6_K).
  using AxpyKSuper = decltype(axpy_q4_K_super);
  AxpyKSuper axpy_k_super(DType type) const {
    switch (type) {
      case DType::Q2_K:
        return axpy_q2_K_super;
      case DType::Q3_K:
        return axpy_q3_K_super;
      case DType::Q4_K:
        return axpy_q4_K_super;
      case DType::Q5_K:
        return axpy_q5_K_super;
      default:
        return axpy_q6_K_super;
    }
  }
};

const CpuKernels& scalar_kernels();
// nullptr when not built for this target or the CPU lacks it; the Far read-ahead unless asked.
const CpuKernels* avx2_kernels(ColumnReadAhead r = ColumnReadAhead::Far);
// AVX2 + AVX-512 VL/VNNI int8 products; likewise.
const CpuKernels* avx512vnni_kernels(ColumnReadAhead r = ColumnReadAhead::Far);
// Scalar first, then each instruction set this CPU has, fastest last (Far read-ahead), then
// the same with the Near read-ahead: every table a test compares with the scalar one.
std::vector<const CpuKernels*> supported_kernels();
// The variant the engine uses: the fastest instruction set (STRATA_CPU overrides) with this
// CPU's read-ahead (chosen_column_read_ahead).
const CpuKernels& best_kernels();
// A table's name with its read-ahead where it has one ("avx512vnni near"), for reports.
std::string kernels_label(const CpuKernels& k);

}  // namespace strata
