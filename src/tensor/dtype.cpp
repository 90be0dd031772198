#include "tensor/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"
#include "tensor/iq_quantize.h"
#include "tensor/kquants.h"
#include "tensor/quantize.h"
#include "tensor/unit_quants.h"

namespace strata {

namespace {

using Form = ActivationForm;

// Row codecs of each family, as plain function pointers for the table.
template <DType T>
void kquant_decode(const void* s, float* d, int64_t n) {
  dequantize_row_kquant(T, s, d, n);
}
template <DType T>
void kquant_encode(const float* s, void* d, int64_t n) {
  quantize_row_kquant(T, s, d, n);
}
template <DType T>
void kquant_encode_importance(const float* s, void* d, int64_t n, const float* importance) {
  quantize_row_kquant(T, s, d, n, importance);
}
template <DType T>
void unit_decode(const void* s, float* d, int64_t n) {
  dequantize_row_unit(T, s, d, n);
}
template <DType T>
void unit_encode(const float* s, void* d, int64_t n) {
  quantize_row_unit(T, s, d, n);
}

template <DType T>
void iq_encode(const float* s, void* d, int64_t n) {
  quantize_row_iq(T, s, d, n, nullptr);
}
template <DType T>
void iq_encode_importance(const float* s, void* d, int64_t n, const float* importance) {
  quantize_row_iq(T, s, d, n, importance);
}

constexpr DTypeInfo known(DType t, const char* name, uint32_t block, uint32_t bytes) {
  return {t, name, block, bytes, false, Form::None, nullptr, nullptr, nullptr};
}
template <DType T>
constexpr DTypeInfo kquant(const char* name, uint32_t bytes) {
  return {T,
          name,
          256,
          bytes,
          true,
          Form::Q8_K,
          kquant_decode<T>,
          kquant_encode<T>,
          kquant_encode_importance<T>};
}
template <DType T>
constexpr DTypeInfo unit(const char* name, uint32_t block, uint32_t bytes, bool encodes) {
  return {T,
          name,
          block,
          bytes,
          true,
          UnitQuant<T>::kInput,
          unit_decode<T>,
          encodes ? unit_encode<T> : nullptr,
          nullptr};
}

// The lattice types strata quantizes (tensor/iq_quantize.h), with an importance or without.
template <DType T>
constexpr DTypeInfo iq_unit(const char* name, uint32_t bytes) {
  return {T,
          name,
          256,
          bytes,
          true,
          UnitQuant<T>::kInput,
          unit_decode<T>,
          iq_encode<T>,
          iq_encode_importance<T>};
}

// Every GGUF type of llama.cpp v0.5.0 (ggml.h), with its block layout (ggml-common.h).
constexpr std::array<DTypeInfo, 35> kTypes = {{
    {DType::F32, "F32", 1, 4, true, Form::F32, dequantize_row_f32, quantize_row_f32, nullptr},
    {DType::F16, "F16", 1, 2, true, Form::F32, dequantize_row_f16, quantize_row_f16, nullptr},
    {DType::BF16, "BF16", 1, 2, true, Form::F32, dequantize_row_bf16, quantize_row_bf16, nullptr},
    {DType::Q8_0, "Q8_0", 32, 34, true, Form::Q8_0, dequantize_row_q8_0_any, quantize_row_q8_0_any,
     nullptr},
    {DType::Q4_0, "Q4_0", 32, 18, true, Form::Q8_0, dequantize_row_q4_0_any, quantize_row_q4_0_any,
     nullptr},
    kquant<DType::Q2_K>("Q2_K", 84),
    kquant<DType::Q3_K>("Q3_K", 110),
    kquant<DType::Q4_K>("Q4_K", 144),
    kquant<DType::Q5_K>("Q5_K", 176),
    kquant<DType::Q6_K>("Q6_K", 210),
    {DType::Q8_K, "Q8_K", 256, 292, false, Form::None, kquant_decode<DType::Q8_K>,
     kquant_encode<DType::Q8_K>, nullptr},
    unit<DType::Q4_1>("Q4_1", 32, 20, true),
    unit<DType::Q5_0>("Q5_0", 32, 22, true),
    unit<DType::Q5_1>("Q5_1", 32, 24, true),
    unit<DType::IQ4_NL>("IQ4_NL", 32, 18, true),
    unit<DType::IQ4_XS>("IQ4_XS", 256, 136, true),
    unit<DType::MXFP4>("MXFP4", 32, 17, true),
    unit<DType::TQ1_0>("TQ1_0", 256, 54, true),
    unit<DType::TQ2_0>("TQ2_0", 256, 66, true),
    unit<DType::Q1_0>("Q1_0", 128, 18, true),
    unit<DType::Q2_0>("Q2_0", 64, 18, true),
    known(DType::Q8_1, "Q8_1", 32, 36),
    iq_unit<DType::IQ2_XXS>("IQ2_XXS", 66),
    iq_unit<DType::IQ2_XS>("IQ2_XS", 74),
    iq_unit<DType::IQ3_XXS>("IQ3_XXS", 98),
    iq_unit<DType::IQ1_S>("IQ1_S", 50),
    iq_unit<DType::IQ3_S>("IQ3_S", 110),
    iq_unit<DType::IQ2_S>("IQ2_S", 82),
    iq_unit<DType::IQ1_M>("IQ1_M", 56),
    unit<DType::NVFP4>("NVFP4", 64, 36, true),
    known(DType::I8, "I8", 1, 1),
    known(DType::I16, "I16", 1, 2),
    known(DType::I32, "I32", 1, 4),
    known(DType::I64, "I64", 1, 8),
    known(DType::F64, "F64", 1, 8),
}};

}  // namespace

std::span<const DTypeInfo> all_dtypes() {
  return kTypes;
}

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  fail("unknown tensor type id {}", static_cast<uint32_t>(type));
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    std::string_view n = t.name;
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        }))
      return t.type;
  }
  return std::nullopt;
}

uint64_t row_bytes(DType type, uint64_t n) {
  const auto& info = dtype_info(type);
  if (n % info.block_size != 0)
    fail("row of {} elements is not a multiple of the {} block size {}", n, info.name,
         info.block_size);
  return n / info.block_size * info.block_bytes;
}

}  // namespace strata
