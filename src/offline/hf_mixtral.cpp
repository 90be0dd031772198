// MixtralForCausalLM as llama.cpp's converter writes it: a llama file (LLaMA's attention, q/k
// rows permuted) whose FFNs are mixtures: the router block_sparse_moe.gate (F32, never
// quantized) as ffn_gate_inp, and the experts' w1 (gate), w3 (up) and w2 (down) stacked in
// ffn_{gate,up,down}_exps, expert e as matrix e. Only SiLU experts: TurboSparse's dReLU
// experts come with their own modelling code, which this converter does not know.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_mixtral(const ConfigReader& r, HfConfig& c) {
  read_llama_config(r, c);
  if (c.model.ffn != FfnActivation::SwiGLU)
    fail("'{}': MixtralForCausalLM with hidden_act '{}' is not supported (silu)", r.path(),
         r.text_or("hidden_act", "silu"));
  c.model.n_expert = r.whole("num_local_experts", 1, kMaxExperts);
  c.model.n_expert_used = r.whole("num_experts_per_tok", 1, c.model.n_expert);
}

std::vector<Planned> plan_mixtral(const HfConfig& c,
                                  const std::function<bool(const std::string&)>& has) {
  constexpr HfExpertNames kNames{"block_sparse_moe.gate.weight", "block_sparse_moe.experts.", "w1",
                                 "w3", "w2"};
  return plan_llama_like(c, has, llama_attention(c), stacked_experts(c, kNames));
}

}  // namespace

const HfFamily& hf_mixtral_family() {
  static const HfFamily f{{"MixtralForCausalLM"},
                          read_mixtral,
                          plan_mixtral,
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
