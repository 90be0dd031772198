#include "format/file_type.h"

#include <map>
#include <utility>

namespace strata {

namespace {

// LLAMA_FTYPE numbers and names (llama.h, llama-model-loader.cpp of v0.5.0).
constexpr std::pair<uint32_t, const char*> kNames[] = {
    {0, "all F32"},
    {1, "F16"},
    {2, "Q4_0"},
    {3, "Q4_1"},
    {7, "Q8_0"},
    {8, "Q5_0"},
    {9, "Q5_1"},
    {10, "Q2_K - Medium"},
    {11, "Q3_K - Small"},
    {12, "Q3_K - Medium"},
    {13, "Q3_K - Large"},
    {14, "Q4_K - Small"},
    {15, "Q4_K - Medium"},
    {16, "Q5_K - Small"},
    {17, "Q5_K - Medium"},
    {18, "Q6_K"},
    {19, "IQ2_XXS - 2.0625 bpw"},
    {20, "IQ2_XS - 2.3125 bpw"},
    {21, "Q2_K - Small"},
    {22, "IQ3_XS - 3.3 bpw"},
    {23, "IQ3_XXS - 3.0625 bpw"},
    {24, "IQ1_S - 1.5625 bpw"},
    {25, "IQ4_NL - 4.5 bpw"},
    {26, "IQ3_S - 3.4375 bpw"},
    {27, "IQ3_S mix - 3.66 bpw"},
    {28, "IQ2_S - 2.5 bpw"},
    {29, "IQ2_M - 2.7 bpw"},
    {30, "IQ4_XS - 4.25 bpw"},
    {31, "IQ1_M - 1.75 bpw"},
    {32, "BF16"},
    {36, "TQ1_0 - 1.69 bpw ternary"},
    {37, "TQ2_0 - 2.06 bpw ternary"},
    {38, "MXFP4 MoE"},
    {39, "NVFP4"},
    {40, "Q1_0"},
    {41, "Q2_0"},
};

// llama.cpp's guess of the file type from the commonest tensor type (llama-model-loader.cpp).
uint32_t guessed_file_type(DType t) {
  constexpr std::pair<DType, uint32_t> kGuess[] = {
      {DType::F32, 0},     {DType::F16, 1},     {DType::BF16, 32},    {DType::Q4_0, 2},
      {DType::Q4_1, 3},    {DType::Q5_0, 8},    {DType::Q5_1, 9},     {DType::Q8_0, 7},
      {DType::Q2_K, 10},   {DType::Q3_K, 12},   {DType::Q4_K, 15},    {DType::Q5_K, 17},
      {DType::Q6_K, 18},   {DType::TQ1_0, 36},  {DType::TQ2_0, 37},   {DType::IQ2_XXS, 19},
      {DType::IQ2_XS, 20}, {DType::IQ2_S, 28},  {DType::IQ3_XXS, 23}, {DType::IQ1_S, 24},
      {DType::IQ1_M, 31},  {DType::IQ4_NL, 25}, {DType::IQ4_XS, 30},  {DType::IQ3_S, 26},
      {DType::NVFP4, 39},  {DType::Q1_0, 40},   {DType::Q2_0, 41}};
  for (const auto& [type, ftype] : kGuess)
    if (type == t) return ftype;
  return 0;  // llama.cpp: "unknown type", all F32
}

}  // namespace

std::string file_type_name(uint32_t file_type) {
  for (const auto& [id, name] : kNames)
    if (id == file_type) return name;
  return "unknown, may not work";
}

std::string file_mixture_name(std::optional<uint32_t> file_type, std::span<const DType> tensors) {
  if (file_type) return file_type_name(*file_type);
  std::map<DType, uint32_t> count;
  DType commonest = DType::F32;
  uint32_t most = 0;
  for (const DType t : tensors)
    if (++count[t] > most) most = count[t], commonest = t;
  return "(guessed) " + file_type_name(guessed_file_type(commonest));
}

}  // namespace strata
