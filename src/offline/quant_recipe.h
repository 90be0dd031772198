// Quantization recipes: which type each tensor of a model gets, by llama-quantize's names
// (Q4_K_M, Q5_K_S, Q2_K, ...). A mixture gives more bits to the tensors that hurt most when
// coarse (attn_v and ffn_down on some layers, the output head), as llama.cpp's mixtures do
// (their rules are public; docs/QUANTIZATION.md has the table), so files strata writes match
// what users know. A pure function of the recipe, the tensor's role, its row length and the
// model's shape: tests check it, `strata quantize` and `strata convert` apply it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/arch/architecture.h"
#include "tensor/dtype.h"

namespace strata {

enum class QuantRecipe {
  F32,
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q2_K,
  Q2_K_S,  // Q2_K with fewer extra bits; llama-quantize makes it only with an importance matrix
  Q3_K_S,
  Q3_K_M,
  Q3_K_L,
  Q4_K_S,
  Q4_K_M,
  Q5_K_S,
  Q5_K_M,
  Q6_K,
  Q4_1,
  Q5_0,
  Q5_1,
  IQ4_NL,
  IQ4_XS,
  MXFP4_MOE,  // a mixture's stacked experts MXFP4, every other matrix Q8_0
  // The lattice mixtures (the 2-bit ones and IQ3_XXS/IQ3_XS need an importance matrix).
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  IQ2_M,
  IQ3_XXS,
  IQ3_XS,
  IQ3_S,
  IQ3_M,
  IQ1_S,
  IQ1_M,
  // Ternary and 1-/2-bit types (llama.cpp's TQ1_0, TQ2_0, Q1_0, Q2_0: for models trained so).
  TQ1_0,
  TQ2_0,
  Q1_0,
  Q2_0,
};

// llama-quantize's names, any case; also Q3_K, Q4_K, Q5_K (= the _M mixtures, as llama-quantize
// reads them). Nothing for an unknown name.
std::optional<QuantRecipe> quant_recipe_from_name(std::string_view name);
const char* quant_recipe_name(QuantRecipe r);
std::string quant_recipe_names();  // "Q4_0, Q8_0, ..." for error messages and --help
// llama.cpp's general.file_type number for the recipe.
uint32_t quant_recipe_file_type(QuantRecipe r);
// The type most tensors get.
DType quant_recipe_base(QuantRecipe r);
// Whether llama-quantize makes the recipe only with an importance matrix (its Q2_K_S: the
// rounding of 2-bit rows without one is too coarse).
bool quant_recipe_needs_imatrix(QuantRecipe r);

// What a tensor is, from its GGUF name. A mixture's expert tensors take their FFN role: the
// stacked ffn_{gate,up,down}_exps and an older file's per-expert ffn_{gate,up,down}.E.
enum class TensorRole {
  Vector,  // 1-D: norms, biases (kept F32)
  Embedding,
  Output,
  AttnQ,
  AttnK,
  AttnV,
  AttnQkv,  // a fused q/k/v (Falcon)
  AttnOutput,
  FfnGate,
  FfnUp,
  FfnDown,    // ffn_down and PowerInfer's ffn_down_t: the same weights
  Predictor,  // PowerInfer's fc1 / fc2
  Router,     // a mixture's ffn_gate_inp: never quantized (llama-quantize leaves it; F32)
  Other,
};
struct TensorName {
  TensorRole role = TensorRole::Other;
  int layer = -1;             // blk.N, or -1
  bool expert_stack = false;  // a 3-D tensor: a mixture's experts stacked
};
TensorName classify_tensor(const std::string& name, size_t n_dims);

struct RecipeOptions {
  int n_layer = 1;
  bool pure = false;                       // every matrix the base type (llama-quantize --pure)
  bool quantize_predictors = false;        // predictors F16 unless asked (see tensor_type)
  QuantRules rules = QuantRules::Default;  // the architecture's exceptions (Architecture)
  // Experts per mixture-of-experts layer (0: dense). llama.cpp gives an 8-expert model's
  // attention more bits: attn_k and attn_v Q8_0, attn_output Q5_K in the low mixtures.
  int n_expert = 0;
  // Query heads per KV head: llama.cpp gives attn_v more bits in the IQ4 mixtures from 4 on.
  int n_gqa = 1;
  // An importance matrix is given: llama.cpp's IQ3_XXS and IQ4 mixtures then keep ffn_down (and
  // IQ3_XXS attn_v) at the base type.
  bool has_imatrix = false;
};

// The type of a tensor whose rows hold `row_length` values. K-quant rows must be whole 256-value
// super-blocks and Q8_0/Q4_0 rows whole 32-value blocks; a row that is not falls back as
// llama-quantize v0.5.0 falls back (Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K ->
// Q8_0; IQ4_XS -> IQ4_NL; then F16 where that does not fit either).
DType recipe_tensor_type(QuantRecipe r, const TensorName& t, int64_t row_length,
                         const RecipeOptions& o);

// Whether llama-quantize v0.5.0 refuses to write the tensor as `type` without an importance
// matrix: the 1- to 3-bit lattice types, except in the embeddings and the output head, and Q2_K in
// a Q2_K_S file.
bool tensor_needs_imatrix(QuantRecipe r, const TensorName& t, DType type);

// llama-quantize's fallback for rows of row_length values that are not whole blocks of `type`
// (see recipe_tensor_type): the type itself where they are.
DType fit_row(DType type, int64_t row_length);

// llama-quantize's manual choices: --output-tensor-type and --token-embedding-type (taken as
// they are, no fallback), --tensor-type PATTERN=TYPE (the first pattern found anywhere in the
// tensor's name, as std::regex_search finds it, replaces the mixture's choice; rows that are not
// whole blocks of it fall back). Patterns are kept lower-case as llama-quantize keeps them.
struct TypeOverrides {
  std::optional<DType> output, token_embedding;
  std::vector<std::pair<std::string, DType>> patterns;
};
// A type strata can write, by llama.cpp's name in any case (fails naming `what`, the flag).
DType writable_type(const std::string& name, const std::string& what);
// Parses "PATTERN=TYPE" into overrides (fails naming a bad pattern or type; TYPE must be one
// strata writes).
void add_tensor_type_override(TypeOverrides& o, const std::string& spec);
// The type of tensor `name` (n_dims dimensions, rows of row_length values) under the recipe and
// the overrides, in llama-quantize's order; 1-D tensors and routers are the recipe's (F32).
DType tensor_type_with_overrides(QuantRecipe r, const std::string& name, size_t n_dims,
                                 int64_t row_length, const RecipeOptions& o,
                                 const TypeOverrides& overrides);

}  // namespace strata
