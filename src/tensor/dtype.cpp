#include "tensor/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace strata {

namespace {
constexpr std::array<DTypeInfo, 20> kTypes = {{
    {DType::F32, "F32", 1, 4, true},       {DType::F16, "F16", 1, 2, true},
    {DType::Q4_0, "Q4_0", 32, 18, true},   {DType::Q4_1, "Q4_1", 32, 20, false},
    {DType::Q5_0, "Q5_0", 32, 22, false},  {DType::Q5_1, "Q5_1", 32, 24, false},
    {DType::Q8_0, "Q8_0", 32, 34, true},   {DType::Q8_1, "Q8_1", 32, 36, false},
    {DType::Q2_K, "Q2_K", 256, 84, true},  {DType::Q3_K, "Q3_K", 256, 110, true},
    {DType::Q4_K, "Q4_K", 256, 144, true}, {DType::Q5_K, "Q5_K", 256, 176, true},
    {DType::Q6_K, "Q6_K", 256, 210, true}, {DType::Q8_K, "Q8_K", 256, 292, false},
    {DType::I8, "I8", 1, 1, false},        {DType::I16, "I16", 1, 2, false},
    {DType::I32, "I32", 1, 4, false},      {DType::I64, "I64", 1, 8, false},
    {DType::F64, "F64", 1, 8, false},      {DType::BF16, "BF16", 1, 2, true},
}};
}  // namespace

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
