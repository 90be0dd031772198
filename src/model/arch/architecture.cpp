#include "model/arch/architecture.h"

#include <array>

namespace strata {

namespace {

template <typename Names, typename Role>
const char* first_name(const Names& names, Role role) {
  for (const auto& n : names)
    if (n.role == role) return n.gguf;
  return nullptr;
}

std::array<const Architecture*, 13> all() {
  return {&llama_architecture(),    &bamboo_architecture(),   &falcon_architecture(),
          &opt_architecture(),      &qwen2_architecture(),    &qwen3_architecture(),
          &qwen3moe_architecture(), &qwen2moe_architecture(), &gemma2_architecture(),
          &gemma3_architecture(),   &phi3_architecture(),     &gpt_oss_architecture(),
          &glm4moe_architecture()};
}

}  // namespace

const char* Architecture::gguf_name(LayerMatrix role) const {
  return first_name(matrices, role);
}

const char* Architecture::gguf_name(LayerVector role) const {
  if (role == LayerVector::ExpertSelectionBias && experts != nullptr) return experts->selection_bias;
  return first_name(vectors, role);
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture* a : all())
    if (a->name == name) return a;
  return nullptr;
}

std::string architecture_names() {
  std::string names;
  for (const Architecture* a : all()) names += (names.empty() ? "" : ", ") + std::string(a->name);
  return names;
}

}  // namespace strata
