#include "tensor/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/block_quant_math.h"
#include "tensor/half.h"

namespace strata {

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b)
    quantize_block_q8_0(src + b * kQK, reinterpret_cast<uint8_t*>(dst + b));
}

void quantize_row_q8_0_activations(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = f32_to_f16(amax / 127.0f);
    for (int j = 0; j < kQK; ++j)
      dst[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));  // half to even
  }
}

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b)
    quantize_block_q4_0(src + b * kQK, reinterpret_cast<uint8_t*>(dst + b));
}

void quantize_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_row_f16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
}
void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
}
void quantize_row_q8_0_any(const float* src, void* dst, int64_t n) {
  quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
}
void quantize_row_q4_0_any(const float* src, void* dst, int64_t n) {
  quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
}

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
}
void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
}
void dequantize_row_q8_0_any(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = blocks[b].qs[j] * d;
  }
}
void dequantize_row_q4_0_any(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[b * kQK + j] = ((blocks[b].qs[j] & 0x0f) - 8) * d;
      dst[b * kQK + j + kQK / 2] = ((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  row_bytes(type, n);  // validates the block multiple
  const auto& info = dtype_info(type);
  if (info.quantize == nullptr) fail("cannot quantize to {}", info.name);
  info.quantize(src, dst, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  const auto& info = dtype_info(type);
  if (importance == nullptr || info.quantize_importance == nullptr)
    return quantize_row(type, src, dst, n);
  row_bytes(type, n);
  info.quantize_importance(src, dst, n, importance);
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  row_bytes(type, n);
  const auto& info = dtype_info(type);
  if (info.dequantize == nullptr) fail("cannot dequantize {}", info.name);
  info.dequantize(src, dst, n);
}

}  // namespace strata
