// Tensor element types, numbered as GGUF numbers them, and the one table of them (dtype.cpp): a
// type is a row there (block size and bytes, the activation form its products read, its row
// decoder and encoder), and its kernels are a family of the CPU kernel table (float, Q8_0/Q4_0,
// the K-quants of tensor/kquants.h, the unit types of tensor/unit_quants.h). Types without
// kernels are known by size, so `strata info` lists any llama.cpp file and the loader names
// the type it refuses.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace strata {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

// What a product with a weight type reads of the activation: the f32 vector, Q8_0 blocks (the
// 32-value types) or Q8_K super-blocks (the K-quants).
enum class ActivationForm : uint8_t { None, F32, Q8_0, Q8_K };

struct DTypeInfo {
  DType type;
  const char* name;
  uint32_t block_size;   // elements per block
  uint32_t block_bytes;  // bytes per block
  bool computable;       // strata has kernels for it
  ActivationForm input;  // what its products read (None: not computable)
  // A row of n values (a multiple of block_size) to f32 and back; null where strata has none.
  void (*dequantize)(const void* src, float* dst, int64_t n);
  void (*quantize)(const float* src, void* dst, int64_t n);
  // The same weighing each value's error by an importance (llama-imatrix's mean squared input
  // of its column); null where the type's quantizer takes none.
  void (*quantize_importance)(const float* src, void* dst, int64_t n, const float* importance);
};

// Returns nothing for an id GGUF files may carry but strata does not know.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType type);
inline const char* dtype_name(DType type) {
  return dtype_info(type).name;
}
std::optional<DType> dtype_from_name(std::string_view name);  // "f16", "Q8_0", ... any case
std::span<const DTypeInfo> all_dtypes();

inline bool is_float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// Bytes of a row of n elements; n must be a multiple of the block size.
uint64_t row_bytes(DType type, uint64_t n);

// Block layouts exactly as GGUF stores them.
constexpr int kQK = 32;  // elements per Q8_0 / Q4_0 block
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK];
};
struct BlockQ4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQK / 2];  // element j in the low nibble of byte j, element j+16 in the high
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace strata
