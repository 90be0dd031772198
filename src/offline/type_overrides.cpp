// llama-quantize's manual type choices (offline/quant_recipe.h: TypeOverrides), in its order
// (llama-quant.cpp, llama_tensor_get_type of v0.5.0).
#include <cctype>
#include <regex>

#include "core/error.h"
#include "offline/quant_recipe.h"

namespace strata {

namespace {

bool is_quantized(DType t) {
  return !is_float_type(t);
}

}  // namespace

DType writable_type(const std::string& name, const std::string& what) {
  const auto t = dtype_from_name(name);
  if (!t || dtype_info(*t).quantize == nullptr)
    fail("{}: '{}' is not a type strata writes", what, name);
  return *t;
}

void add_tensor_type_override(TypeOverrides& o, const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    fail("--tensor-type '{}' is not PATTERN=TYPE", spec);
  std::string pattern = spec.substr(0, eq);
  for (char& c : pattern) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  try {
    std::regex check(pattern);
  } catch (const std::regex_error& e) {
    fail("--tensor-type '{}': the pattern is not a regular expression ({})", spec, e.what());
  }
  o.patterns.emplace_back(pattern, writable_type(spec.substr(eq + 1), "--tensor-type"));
}

DType tensor_type_with_overrides(QuantRecipe r, const std::string& name, size_t n_dims,
                                 int64_t row_length, const RecipeOptions& o,
                                 const TypeOverrides& overrides) {
  const TensorName t = classify_tensor(name, n_dims);
  if (t.role == TensorRole::Vector || t.role == TensorRole::Router)
    return recipe_tensor_type(r, t, row_length, o);
  if (t.role == TensorRole::Embedding && overrides.token_embedding && name == "token_embd.weight")
    return *overrides.token_embedding;
  if (t.role == TensorRole::Output && overrides.output) return *overrides.output;
  const DType base = quant_recipe_base(r);
  if (is_quantized(base))
    for (const auto& [pattern, type] : overrides.patterns)
      if (std::regex_search(name, std::regex(pattern))) return fit_row(type, row_length);
  return recipe_tensor_type(r, t, row_length, o);
}

}  // namespace strata
