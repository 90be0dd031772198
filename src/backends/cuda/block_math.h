// The CUDA kernels' per-element math, in functions both compilers build (STRATA_HD), so the CPU
// tests (tests/test_cuda_math.cpp) check on any machine what a GPU run would otherwise be the
// first to see: how each weight type's values are decoded (a 16-value unit of a row at a time
// for products, one element for the axpy; f16 conversions are tensor/half.h's), the rotation
// of a pair, the FFN activations. A device run then checks only the rest (indexing, launches).
//
// Products read a row as units of 16 values: unit u is values [16u, 16u + 16), half a Q4_0 or
// Q8_0 block, one K-quant group. Lane l of a warp takes units l, l + 32, ... in order, sums
// its products in that order, and the 32 lane sums are added by a fixed butterfly
// (lane_tree_sum mirrors it on the host), so a product's bits are the same on every run.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"
#include "tensor/column_groups.h"
#include "tensor/dtype.h"
#include "tensor/ffn_activation.h"
#include "tensor/half.h"
#include "tensor/soft_cap.h"
#include "tensor/kquants.h"
#include "tensor/unit_quants.h"

namespace strata::cuda_math {

constexpr int kUnit = 16;  // values per decoded unit

// The f16/bf16 conversions are tensor/half.h's (host-device functions).
STRATA_HD inline float half_to_float(uint16_t h) {
  return f16_to_f32(h);
}
STRATA_HD inline uint16_t float_to_half(float f) {
  return f32_to_f16(f);
}
STRATA_HD inline float bf16_to_float(uint16_t h) {
  return bf16_to_f32(h);
}

STRATA_HD inline uint16_t read_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Decoders: unit u of a row (16 values into v), and value j of a row, per weight type. Rows
// start at their first byte; block structs are read through byte pointers (rows of Q4_0 are
// 18-byte blocks: no alignment beyond a byte may be assumed).
// The unit types (tensor/unit_quants.h) need no specialisation: the primary template decodes
// them through their traits, as dequantization does.
template <DType T>
struct Decode {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    float all[kUnitValues];
    row_unit_values<T>(row, u / 2, all);
    for (int i = 0; i < kUnit; ++i) v[i] = all[(u % 2) * kUnit + i];
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    float all[kUnitValues];
    row_unit_values<T>(row, j / kUnitValues, all);
    return all[j % kUnitValues];
  }
};

template <>
struct Decode<DType::F32> {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    const float* p = reinterpret_cast<const float*>(row) + u * kUnit;
    for (int i = 0; i < kUnit; ++i) v[i] = p[i];
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    return reinterpret_cast<const float*>(row)[j];
  }
};

template <>
struct Decode<DType::F16> {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * kUnit;
    for (int i = 0; i < kUnit; ++i) v[i] = half_to_float(p[i]);
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    return half_to_float(reinterpret_cast<const uint16_t*>(row)[j]);
  }
};

template <>
struct Decode<DType::BF16> {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * kUnit;
    for (int i = 0; i < kUnit; ++i) v[i] = bf16_to_float(p[i]);
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[j]);
  }
};

// Q8_0: 34-byte blocks {f16 d, int8 qs[32]}; x = q * d.
template <>
struct Decode<DType::Q8_0> {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    const uint8_t* b = row + (u / 2) * 34;
    const float d = half_to_float(read_u16(b));
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2) + (u % 2) * kUnit;
    for (int i = 0; i < kUnit; ++i) v[i] = q[i] * d;
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    const uint8_t* b = row + (j / 32) * 34;
    return reinterpret_cast<const int8_t*>(b + 2)[j % 32] * half_to_float(read_u16(b));
  }
};

// Q4_0: 18-byte blocks {f16 d, qs[16]}: value j < 16 in the low nibble of byte j, value j + 16
// in the high nibble; x = (q - 8) * d.
template <>
struct Decode<DType::Q4_0> {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    const uint8_t* b = row + (u / 2) * 18;
    const float d = half_to_float(read_u16(b));
    const uint8_t* q = b + 2;
    const int shift = (u % 2) * 4;
    for (int i = 0; i < kUnit; ++i) v[i] = (((q[i] >> shift) & 0x0f) - 8) * d;
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    const uint8_t* b = row + (j / 32) * 18;
    const int k = static_cast<int>(j % 32);
    const int q = k < 16 ? (b[2 + k] & 0x0f) : (b[2 + k - 16] >> 4);
    return (q - 8) * half_to_float(read_u16(b));
  }
};

// K-quants: super-blocks of 256 values, unit u = group u % 16 of super-block u / 16, decoded as
// dequantization does (tensor/kquants.h: kquant_value).
template <class Block>
struct DecodeKQuant {
  STRATA_HD static void unit(const uint8_t* row, int64_t u, float* v) {
    using K = KQuant<Block>;
    // Super-blocks are an even number of bytes and rows start on even addresses: the struct's
    // 2-byte alignment holds.
    const Block& b = *reinterpret_cast<const Block*>(row + (u / kKGroups) * sizeof(Block));
    const int g = static_cast<int>(u % kKGroups);
    const float d = half_to_float(K::d_bits(b)), dmin = half_to_float(K::dmin_bits(b));
    const int scale = K::scale(b, g), min = K::min(b, g);
    for (int i = 0; i < kUnit; ++i)
      v[i] = kquant_value<Block>(d, dmin, scale, min, K::quant(b, 16 * g + i));
  }
  STRATA_HD static float value(const uint8_t* row, int64_t j) {
    using K = KQuant<Block>;
    const Block& b = *reinterpret_cast<const Block*>(row + (j / kQK_K) * sizeof(Block));
    const int i = static_cast<int>(j % kQK_K), g = i / 16;
    return kquant_value<Block>(half_to_float(K::d_bits(b)), half_to_float(K::dmin_bits(b)),
                               K::scale(b, g), K::min(b, g), K::quant(b, i));
  }
};
template <>
struct Decode<DType::Q2_K> : DecodeKQuant<BlockQ2_K> {};
template <>
struct Decode<DType::Q3_K> : DecodeKQuant<BlockQ3_K> {};
template <>
struct Decode<DType::Q4_K> : DecodeKQuant<BlockQ4_K> {};
template <>
struct Decode<DType::Q5_K> : DecodeKQuant<BlockQ5_K> {};
template <>
struct Decode<DType::Q6_K> : DecodeKQuant<BlockQ6_K> {};

// The weight an axpy term multiplies: value j of row `row` of the file's rows, or of a column-group
// copy (tensor/column_groups.h: TEAL's copies of Q8_0 and K-quant matrices, whose rows are the
// inputs) input `row`'s weight of output j.
template <DType T>
STRATA_HD inline float axpy_weight(const uint8_t* wt, uint64_t row_bytes, int64_t cols,
                                   bool column_groups, int64_t row, int64_t j) {
  if constexpr (has_column_groups(T))
    if (column_groups) return column_group_value(T, wt, cols, j, row);
  return Decode<T>::value(wt + static_cast<uint64_t>(row) * row_bytes, j);
}

// The types the CUDA kernels compute with.
inline bool cuda_weight_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return is_unit_type(t);
  }
}

// The 32 lane sums of a warp added as the kernels' butterfly does (xor 16, 8, 4, 2, 1): every
// lane ends with the same total; lane 0's is returned.
STRATA_HD inline float lane_tree_sum(float* lanes) {
  for (int step = 16; step > 0; step /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ step];
    for (int l = 0; l < 32; ++l) lanes[l] = next[l];
  }
  return lanes[0];
}

// The power of two a row of activations is divided by before it becomes f16 for a GEMM, so its
// largest magnitude stays within kHalfInputLimit (f16's largest finite value is 65504; an
// activation above it would be inf). 1 for rows already within it (their f16 values unchanged),
// and for a non-finite maximum (an inf or NaN input stays what it is). Dividing by a power of
// two is exact, and so is multiplying the product back.
inline constexpr float kHalfInputLimit = 32768.0f;
STRATA_HD inline float half_input_scale(float max_abs) {
  if (!(max_abs > kHalfInputLimit) || max_abs == INFINITY) return 1.0f;
  int e = 0;
  frexpf(max_abs / kHalfInputLimit, &e);  // max_abs / limit <= 2^e
  return ldexpf(1.0f, e);
}

// RoPE on one adjacent pair (GGUF llama files), as the CPU backend computes it.
STRATA_HD inline void rotate_pair(float& x0, float& x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
}

// The elements of a head that RoPE pair i rotates: adjacent (2i, 2i + 1), or NeoX's halves
// (i, i + half), as the CPU backend pairs them.
STRATA_HD inline int rope_first(bool neox, int i) {
  return neox ? i : 2 * i;
}
STRATA_HD inline int rope_second(bool neox, int i, int half) {
  return neox ? i + half : 2 * i + 1;
}

// One FFN activation value (gate unused for the plain FFNs), as the CPU backend computes it.
STRATA_HD inline float activate(FfnActivation act, float g, float u) {
  switch (act) {
    case FfnActivation::SwiGLU:
      return g / (1.0f + expf(-g)) * u;
    case FfnActivation::ReGLU:
      return g > 0.0f ? g * u : 0.0f;
    case FfnActivation::DReLU:
      return (g > 0.0f && u > 0.0f) ? g * u : 0.0f;
    case FfnActivation::GeGLU:
      return gelu_tanh(g) * u;
    case FfnActivation::ReLU:
      return u < 0.0f ? 0.0f : u;  // std::max(u, 0.0f), -0 and NaN included
    case FfnActivation::GELU:
      return gelu_tanh(u);
    case FfnActivation::SwiGLUOai:
      return swiglu_oai(g, u);
  }
  return 0.0f;
}

// An attention score from its dot product: times scale, then soft-capped as cap * tanh(s / cap)
// when cap > 0 (Gemma 2).
STRATA_HD inline float attention_score(float dot, float scale, float cap) {
  const float s = dot * scale;
  return cap > 0.0f ? soft_cap(s, cap) : s;
}

}  // namespace strata::cuda_math
