#include "offline/quant_recipe.h"

#include <array>
#include <cctype>
#include <charconv>
#include <string_view>

#include "tensor/kquants.h"

namespace strata {

namespace {

struct RecipeInfo {
  QuantRecipe recipe;
  const char* name;
  DType base;
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_* numbers
};

constexpr std::array<RecipeInfo, 35> kRecipes = {{
    {QuantRecipe::F32, "F32", DType::F32, 0},
    {QuantRecipe::F16, "F16", DType::F16, 1},
    {QuantRecipe::BF16, "BF16", DType::BF16, 32},
    {QuantRecipe::Q8_0, "Q8_0", DType::Q8_0, 7},
    {QuantRecipe::Q4_0, "Q4_0", DType::Q4_0, 2},
    {QuantRecipe::Q2_K, "Q2_K", DType::Q2_K, 10},
    {QuantRecipe::Q2_K_S, "Q2_K_S", DType::Q2_K, 21},
    {QuantRecipe::Q3_K_S, "Q3_K_S", DType::Q3_K, 11},
    {QuantRecipe::Q3_K_M, "Q3_K_M", DType::Q3_K, 12},
    {QuantRecipe::Q3_K_L, "Q3_K_L", DType::Q3_K, 13},
    {QuantRecipe::Q4_K_S, "Q4_K_S", DType::Q4_K, 14},
    {QuantRecipe::Q4_K_M, "Q4_K_M", DType::Q4_K, 15},
    {QuantRecipe::Q5_K_S, "Q5_K_S", DType::Q5_K, 16},
    {QuantRecipe::Q5_K_M, "Q5_K_M", DType::Q5_K, 17},
    {QuantRecipe::Q6_K, "Q6_K", DType::Q6_K, 18},
    {QuantRecipe::Q4_1, "Q4_1", DType::Q4_1, 3},
    {QuantRecipe::Q5_0, "Q5_0", DType::Q5_0, 8},
    {QuantRecipe::Q5_1, "Q5_1", DType::Q5_1, 9},
    {QuantRecipe::IQ4_NL, "IQ4_NL", DType::IQ4_NL, 25},
    {QuantRecipe::IQ4_XS, "IQ4_XS", DType::IQ4_XS, 30},
    {QuantRecipe::MXFP4_MOE, "MXFP4_MOE", DType::MXFP4, 38},
    {QuantRecipe::IQ2_XXS, "IQ2_XXS", DType::IQ2_XXS, 19},
    {QuantRecipe::IQ2_XS, "IQ2_XS", DType::IQ2_XS, 20},
    {QuantRecipe::IQ2_S, "IQ2_S", DType::IQ2_XS, 28},  // llama.cpp's: IQ2_XS most tensors
    {QuantRecipe::IQ2_M, "IQ2_M", DType::IQ2_S, 29},
    {QuantRecipe::IQ3_XXS, "IQ3_XXS", DType::IQ3_XXS, 23},
    {QuantRecipe::IQ3_XS, "IQ3_XS", DType::IQ3_S, 22},
    {QuantRecipe::IQ3_S, "IQ3_S", DType::IQ3_S, 26},
    {QuantRecipe::IQ3_M, "IQ3_M", DType::IQ3_S, 27},
    {QuantRecipe::IQ1_S, "IQ1_S", DType::IQ1_S, 24},
    {QuantRecipe::IQ1_M, "IQ1_M", DType::IQ1_M, 31},
    {QuantRecipe::TQ1_0, "TQ1_0", DType::TQ1_0, 36},
    {QuantRecipe::TQ2_0, "TQ2_0", DType::TQ2_0, 37},
    {QuantRecipe::Q1_0, "Q1_0", DType::Q1_0, 40},
    {QuantRecipe::Q2_0, "Q2_0", DType::Q2_0, 41},
}};

const RecipeInfo& info(QuantRecipe r) {
  for (const auto& i : kRecipes)
    if (i.recipe == r) return i;
  return kRecipes[1];
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// llama.cpp's choice of the layers that get more bits in the _M mixtures: the first and last
// eighth, and every third layer between.
bool more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// Falcon's ffn_down in the mixtures (llama.cpp's exception): fewer extra bits than LLaMA's.
DType falcon_ffn_down(QuantRecipe r, DType base, int i, int n) {
  if (r == QuantRecipe::Q2_K) return DType::Q3_K;
  if (r == QuantRecipe::Q2_K_S) return i < n / 8 ? DType::Q4_K : base;
  if (r == QuantRecipe::Q3_K_L) return DType::Q4_K;
  if (r == QuantRecipe::Q3_K_M)
    return i < n / 16 ? DType::Q5_K : more_bits(i, n) ? DType::Q4_K : base;
  if (r == QuantRecipe::Q4_K_M)
    return i < n / 16 ? DType::Q6_K : more_bits(i, n) ? DType::Q5_K : base;
  if (r == QuantRecipe::Q5_K_M && more_bits(i, n)) return DType::Q6_K;
  return base;
}

// The 1- and 2-bit lattice mixtures (llama.cpp's IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M
// branch): attn_v, the first eighth's ffn_down and attn_output get more bits, the rest the base.
bool iq1(QuantRecipe r) {
  return r == QuantRecipe::IQ1_S || r == QuantRecipe::IQ1_M;
}
bool two_bit(QuantRecipe r) {
  return r == QuantRecipe::IQ2_XXS || r == QuantRecipe::IQ2_XS || r == QuantRecipe::IQ2_S ||
         r == QuantRecipe::IQ2_M || iq1(r);
}
DType two_bit_type(QuantRecipe r, const TensorName& t, const RecipeOptions& o) {
  const DType base = info(r).base;
  const bool s_or_m = r == QuantRecipe::IQ2_S || r == QuantRecipe::IQ2_M;
  switch (t.role) {
    case TensorRole::AttnV:
      if (o.n_gqa >= 4 || o.n_expert >= 4) return DType::Q4_K;
      return s_or_m ? DType::IQ3_S : DType::Q2_K;
    case TensorRole::AttnK:
      return o.n_expert == 8 ? DType::Q4_K : base;
    case TensorRole::FfnDown:
      if (t.layer < o.n_layer / 8) return s_or_m ? DType::IQ3_S : DType::Q2_K;
      return base;
    case TensorRole::AttnOutput:
      if (o.n_expert == 8) return DType::Q5_K;
      if (iq1(r)) return DType::IQ2_XXS;
      return s_or_m ? DType::IQ3_S : base;
    default:
      return base;
  }
}

// The 3-bit lattice mixtures' exceptions (llama.cpp's IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M rules), or
// nothing where the tensor keeps the general rules.
std::optional<DType> three_bit_type(QuantRecipe r, const TensorName& t, const RecipeOptions& o) {
  const int i = t.layer, n = o.n_layer;
  const bool xxs = r == QuantRecipe::IQ3_XXS, xs = r == QuantRecipe::IQ3_XS;
  const bool m = r == QuantRecipe::IQ3_M;
  if (!xxs && !xs && !m && r != QuantRecipe::IQ3_S) return std::nullopt;
  switch (t.role) {
    case TensorRole::AttnV:
      if (o.n_expert == 8) return DType::Q8_0;
      if (xxs) return o.n_gqa >= 4 ? DType::Q4_K : o.has_imatrix ? DType::IQ3_XXS : DType::IQ3_S;
      if (m || o.n_gqa >= 4) return DType::Q4_K;
      return std::nullopt;
    case TensorRole::AttnK:
    case TensorRole::AttnQ:
      if (t.role == TensorRole::AttnK && o.n_expert == 8) return DType::Q8_0;
      if (xs) return DType::IQ3_XXS;
      if (xxs) return DType::IQ2_S;
      return std::nullopt;
    case TensorRole::FfnDown:
      if (xxs && !o.has_imatrix) return i < n / 8 ? DType::Q4_K : DType::Q3_K;
      if (m && (i < n / 8 || (o.n_expert == 8 && more_bits(i, n)))) return DType::Q4_K;
      return std::nullopt;
    case TensorRole::AttnOutput:
      if (o.n_expert == 8) return DType::Q5_K;
      if (xxs) return DType::IQ3_S;
      if (m) return DType::Q4_K;
      return std::nullopt;
    case TensorRole::AttnQkv:
      if (m) return DType::Q4_K;
      return std::nullopt;
    case TensorRole::FfnGate:
    case TensorRole::FfnUp:
      if (xs && i >= n / 8 && i < 7 * n / 8) return DType::IQ3_XXS;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The head: Q5_K in the 2-bit and IQ3_XXS mixtures, Q6_K in the other quantized ones.
DType output_type(QuantRecipe r, DType base) {
  if (two_bit(r) || r == QuantRecipe::IQ3_XXS) return DType::Q5_K;
  return is_float_type(base) || base == DType::Q8_0 ? base : DType::Q6_K;
}
// The token embeddings: fewer bits than the base in the 2-bit mixtures, IQ3_S in IQ3_XXS's, Q4_K
// in the ternary and Q2_0 files.
DType embedding_type(QuantRecipe r, DType base) {
  if (r == QuantRecipe::IQ2_XXS || r == QuantRecipe::IQ2_XS || iq1(r)) return DType::Q2_K;
  if (r == QuantRecipe::IQ2_S || r == QuantRecipe::IQ2_M || r == QuantRecipe::IQ3_XXS)
    return DType::IQ3_S;
  if (r == QuantRecipe::TQ1_0 || r == QuantRecipe::TQ2_0 || r == QuantRecipe::Q2_0)
    return DType::Q4_K;
  return base;
}

// The mixture's type before the row-length check.
DType mixture_type(QuantRecipe r, const TensorName& t, const RecipeOptions& o) {
  const DType base = info(r).base;
  const int i = t.layer, n = o.n_layer;
  const bool falcon = o.rules == QuantRules::Falcon;
  const bool eight_experts = o.n_expert == 8;  // llama.cpp's Mixtral-8x7B rule
  const bool iq4 = r == QuantRecipe::IQ4_NL || r == QuantRecipe::IQ4_XS;
  if (r == QuantRecipe::MXFP4_MOE) return t.expert_stack ? DType::MXFP4 : DType::Q8_0;
  if (t.role == TensorRole::Output) return falcon ? DType::Q8_0 : output_type(r, base);
  if (t.role == TensorRole::Embedding) return embedding_type(r, base);
  if (two_bit(r)) return two_bit_type(r, t, o);
  if (const auto three = three_bit_type(r, t, o)) return *three;
  switch (t.role) {
    case TensorRole::AttnK:
      return eight_experts ? DType::Q8_0 : base;
    case TensorRole::AttnV:  // i: the layer, as llama.cpp's count of attn_v tensors
      if (eight_experts) return DType::Q8_0;
      if (iq4 && o.n_gqa >= 4) return DType::Q5_K;
      if (r == QuantRecipe::Q2_K) return o.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
      if (r == QuantRecipe::Q2_K_S && o.n_gqa >= 4) return DType::Q4_K;
      if (r == QuantRecipe::Q3_K_M) return i < 2 ? DType::Q5_K : DType::Q4_K;
      if (r == QuantRecipe::Q3_K_L) return DType::Q5_K;
      if ((r == QuantRecipe::Q4_K_M || r == QuantRecipe::Q5_K_M) && more_bits(i, n))
        return DType::Q6_K;
      if (r == QuantRecipe::Q4_K_S && i < 4) return DType::Q5_K;
      return base;
    case TensorRole::FfnDown:
      if (falcon) return iq4 && i < n / 8 ? DType::Q5_K : falcon_ffn_down(r, base, i, n);
      if (r == QuantRecipe::Q2_K) return DType::Q3_K;
      if (r == QuantRecipe::Q2_K_S) return i < n / 8 ? DType::Q4_K : base;
      if (r == QuantRecipe::Q3_K_M) return i < n / 16 ? DType::Q5_K : DType::Q4_K;
      if (r == QuantRecipe::Q3_K_L) return DType::Q5_K;
      if ((r == QuantRecipe::Q4_K_M || r == QuantRecipe::Q5_K_M) && more_bits(i, n))
        return DType::Q6_K;
      if (iq4 && i < n / 8 && !o.has_imatrix) return DType::Q5_K;  // llama.cpp's rule
      if (r == QuantRecipe::Q4_K_S && i < n / 8) return DType::Q5_K;
      return base;
    case TensorRole::AttnQkv:  // llama.cpp's rule for a fused q/k/v
      if (r == QuantRecipe::Q3_K_M || r == QuantRecipe::Q3_K_L) return DType::Q4_K;
      if (r == QuantRecipe::Q4_K_M) return DType::Q5_K;
      if (r == QuantRecipe::Q5_K_M) return DType::Q6_K;
      return base;
    case TensorRole::AttnOutput:
      if (falcon) return r == QuantRecipe::Q3_K_L ? DType::Q4_K : base;
      if (eight_experts)
        return r == QuantRecipe::Q2_K || r == QuantRecipe::Q3_K_S || r == QuantRecipe::Q3_K_M ||
                       r == QuantRecipe::Q4_K_S || r == QuantRecipe::Q4_K_M || iq4
                   ? DType::Q5_K
                   : base;
      if (r == QuantRecipe::Q2_K) return DType::Q3_K;
      if (r == QuantRecipe::Q3_K_M) return DType::Q4_K;
      if (r == QuantRecipe::Q3_K_L) return DType::Q5_K;
      return base;
    default:
      return base;
  }
}

}  // namespace

// llama-quantize's fallback for a row that is not whole blocks of the type (llama-quant.cpp,
// tensor_type_fallback), then F16 where the fallback does not fit either.
DType fit_row(DType type, int64_t row_length) {
  const auto fits = [&](DType t) {
    return row_length % static_cast<int64_t>(dtype_info(t).block_size) == 0;
  };
  if (fits(type)) return type;
  DType fallback = DType::F16;
  switch (type) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ4_XS:
      fallback = DType::IQ4_NL;
      break;
    case DType::Q2_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::TQ1_0:
    case DType::TQ2_0:
      fallback = DType::Q4_0;
      break;
    case DType::Q4_K:
      fallback = DType::Q5_0;
      break;
    case DType::Q5_K:
      fallback = DType::Q5_1;
      break;
    case DType::Q6_K:
      fallback = DType::Q8_0;
      break;
    default:
      break;
  }
  return fits(fallback) ? fallback : DType::F16;
}

std::optional<QuantRecipe> quant_recipe_from_name(std::string_view name) {
  for (const auto& i : kRecipes)
    if (same_name(name, i.name)) return i.recipe;
  if (same_name(name, "Q3_K")) return QuantRecipe::Q3_K_M;
  if (same_name(name, "Q4_K")) return QuantRecipe::Q4_K_M;
  if (same_name(name, "Q5_K")) return QuantRecipe::Q5_K_M;
  return std::nullopt;
}

const char* quant_recipe_name(QuantRecipe r) {
  return info(r).name;
}

std::string quant_recipe_names() {
  std::string s;
  for (const auto& i : kRecipes) s += std::string(s.empty() ? "" : ", ") + i.name;
  return s;
}

uint32_t quant_recipe_file_type(QuantRecipe r) {
  return info(r).file_type;
}

DType quant_recipe_base(QuantRecipe r) {
  return info(r).base;
}

bool quant_recipe_needs_imatrix(QuantRecipe r) {
  switch (r) {
    case QuantRecipe::Q2_K_S:
    case QuantRecipe::IQ2_XXS:
    case QuantRecipe::IQ2_XS:
    case QuantRecipe::IQ2_S:
    case QuantRecipe::IQ2_M:
    case QuantRecipe::IQ3_XXS:
    case QuantRecipe::IQ3_XS:
    case QuantRecipe::IQ1_S:
    case QuantRecipe::IQ1_M:
      return true;
    default:
      return false;
  }
}

bool tensor_needs_imatrix(QuantRecipe r, const TensorName& t, DType type) {
  if (t.role == TensorRole::Embedding || t.role == TensorRole::Output) return false;
  switch (type) {
    case DType::IQ3_XXS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ1_M:
    case DType::IQ1_S:
      return true;
    case DType::Q2_K:
      return r == QuantRecipe::Q2_K_S;
    default:
      return false;
  }
}

namespace {

// "blk.N.rest" as the layer N and the rest of the name; false for any other name, and for an N
// that does not fit an int. (A parser, not std::regex: the regex cost 4 s of compile time.)
bool split_layer_name(std::string_view name, int& layer, std::string_view& rest) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return false;
  name.remove_prefix(kPrefix.size());
  if (name.empty() || !std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  const char* end = name.data() + name.size();
  const auto [digits_end, ec] = std::from_chars(name.data(), end, layer);
  if (ec != std::errc() || digits_end == end || *digits_end != '.') return false;
  rest = std::string_view(digits_end + 1, static_cast<size_t>(end - digits_end - 1));
  return true;
}

// A mixture's tensors by their layer-relative name: the router (and a shared expert's gate,
// which llama-quantize leaves as it leaves every ffn_gate_inp*), the stacked experts
// (ffn_up_exps.weight), a shared expert (ffn_up_shexp.weight) and an older file's one tensor
// per expert (ffn_up.3.weight).
TensorRole expert_role(std::string_view rest) {
  if (rest == "ffn_gate_inp.weight" || rest == "ffn_gate_inp_shexp.weight")
    return TensorRole::Router;
  constexpr std::string_view kSuffix = ".weight";
  if (!rest.ends_with(kSuffix)) return TensorRole::Other;
  rest.remove_suffix(kSuffix.size());
  if (rest.ends_with("_exps") || rest.ends_with("_shexp")) {
    rest.remove_suffix(rest.ends_with("_exps") ? 5 : 6);
  } else {
    const size_t dot = rest.rfind('.');
    if (dot == std::string_view::npos || dot + 1 == rest.size()) return TensorRole::Other;
    for (char ch : rest.substr(dot + 1))
      if (!std::isdigit(static_cast<unsigned char>(ch))) return TensorRole::Other;
    rest = rest.substr(0, dot);
  }
  if (rest == "ffn_gate") return TensorRole::FfnGate;
  if (rest == "ffn_up") return TensorRole::FfnUp;
  if (rest == "ffn_down") return TensorRole::FfnDown;
  return TensorRole::Other;
}

}  // namespace

TensorName classify_tensor(const std::string& name, size_t n_dims) {
  TensorName t;
  // llama-quantize quantizes only tensors whose name ends in "weight": 2-D biases (gpt-oss's
  // stacked expert biases) stay as they are, as vectors do.
  if (n_dims < 2 || !name.ends_with("weight")) {
    t.role = TensorRole::Vector;
    return t;
  }
  t.expert_stack = n_dims >= 3;
  std::string_view rest = name;
  int layer = -1;
  if (split_layer_name(name, layer, rest)) t.layer = layer;
  struct Suffix {
    const char* name;
    TensorRole role;
  };
  static const Suffix kSuffixes[] = {
      {"token_embd.weight", TensorRole::Embedding},
      {"output.weight", TensorRole::Output},
      {"position_embd.weight", TensorRole::Embedding},
      {"attn_q.weight", TensorRole::AttnQ},
      {"attn_k.weight", TensorRole::AttnK},
      {"attn_v.weight", TensorRole::AttnV},
      {"attn_output.weight", TensorRole::AttnOutput},
      {"attn_qkv.weight", TensorRole::AttnQkv},
      {"ffn_gate.weight", TensorRole::FfnGate},
      {"ffn_up.weight", TensorRole::FfnUp},
      {"ffn_down.weight", TensorRole::FfnDown},
      {"ffn_down_t.weight", TensorRole::FfnDown},
      {"fc1.weight", TensorRole::Predictor},
      {"fc2.weight", TensorRole::Predictor},
  };
  for (const auto& s : kSuffixes)
    if (rest == s.name) t.role = s.role;
  if (t.role == TensorRole::Other && t.layer >= 0) t.role = expert_role(rest);
  return t;
}

DType recipe_tensor_type(QuantRecipe r, const TensorName& t, int64_t row_length,
                         const RecipeOptions& o) {
  const DType base = info(r).base;
  if (t.role == TensorRole::Vector || t.role == TensorRole::Router) return DType::F32;
  if (t.role == TensorRole::Predictor) {
    // The predictors decide which neurons run: F16 unless asked; asked, Q4_0 in Q4_0 files (as
    // PowerInfer ships them) and Q8_0 otherwise (their rows are rarely whole super-blocks).
    if (!o.quantize_predictors || is_float_type(base)) return DType::F16;
    return fit_row(base == DType::Q4_0 ? DType::Q4_0 : DType::Q8_0, row_length);
  }
  if (is_float_type(base)) return base;
  const DType type = o.pure ? base : mixture_type(r, t, o);
  return fit_row(type, row_length);
}

}  // namespace strata
