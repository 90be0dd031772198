// Tensor element types, numbered as GGUF numbers them. strata computes with F32, F16, BF16,
// Q8_0, Q4_0 and the K-quants Q2_K..Q6_K (tensor/kquants.h); the other GGUF types are known by size
// only, so `strata info` can list any llama.cpp file and the loader can name the unsupported type
// in its error.
#pragma once

#include <cstdint>
#include <optional>
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
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  const char* name;
  uint32_t block_size;   // elements per block
  uint32_t block_bytes;  // bytes per block
  bool computable;       // strata has kernels for it
};

// Returns nothing for an id GGUF files may carry but strata does not know.
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType type);
inline const char* dtype_name(DType type) {
  return dtype_info(type).name;
}
std::optional<DType> dtype_from_name(std::string_view name);  // "f16", "Q8_0", ... any case

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
