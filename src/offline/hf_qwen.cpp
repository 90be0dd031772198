// Qwen2ForCausalLM (Qwen2, Qwen2.5) and Qwen3ForCausalLM (dense Qwen3) as llama.cpp's converter
// writes them: LLaMA's tensors with q/k rows as Hugging Face has them (the GGUF qwen2/qwen3
// files rotate NeoX's halves, as HF does); Qwen2 adds q/k/v biases, Qwen3 instead RMS-norms
// each query and key head (q_norm, k_norm) and takes its head size from head_dim. The head is
// tied to the embedding where tie_word_embeddings says so (the small models). A checkpoint that
// turns its sliding window on is refused: llama.cpp's qwen2/qwen3 run full attention.
// Qwen3MoeForCausalLM (qwen3moe) is Qwen3's attention with a mixture of experts in every layer;
// Qwen2MoeForCausalLM (qwen2moe) Qwen2's with a mixture and a shared expert.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_qwen(const ConfigReader& r, HfConfig& c, const char* arch) {
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu") fail("'{}': hidden_act '{}' is not supported (silu)", r.path(), act);
  if (r.flag_or("use_sliding_window", false))
    fail("'{}': {} with use_sliding_window true is not supported", r.path(), arch);
  c.model.ffn = FfnActivation::SwiGLU;
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.architecture = arch;
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-6));
  c.tied = r.flag_or("tie_word_embeddings", false);
}

std::vector<Planned> plan_qwen(const HfConfig& c,
                               const std::function<bool(const std::string&)>& has, bool qkv_biases,
                               bool head_norms, const LayerPlan& ffn = nullptr) {
  const ModelConfig& m = c.model;
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  return plan_llama_like(
      c, has,
      [&](const std::string& g, const std::string& h, auto& p) {
        for (auto [name, hf, rows] : {std::tuple{"attn_q", "q_proj", q_dim},
                                      {"attn_k", "k_proj", kv_dim},
                                      {"attn_v", "v_proj", kv_dim}}) {
          p.push_back({g + name + ".weight", h + "self_attn." + hf + ".weight", rows, m.n_embd});
          if (qkv_biases)
            p.push_back({g + name + ".bias", h + "self_attn." + hf + ".bias", rows, 0});
        }
        if (head_norms) {
          p.push_back({g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", m.head_dim, 0});
          p.push_back({g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", m.head_dim, 0});
        }
      },
      ffn);
}

// A Qwen MoE checkpoint whose every layer is a sparse block (decoder_sparse_step 1, no
// mlp_only_layers): what llama.cpp's qwen2moe/qwen3moe run; dense layers between are refused.
void require_every_layer_sparse(const ConfigReader& r, const char* family) {
  if (r.whole_or("decoder_sparse_step", 1, kU32, 1) != 1)
    fail(
        "'{}': {} with decoder_sparse_step other than 1 (dense layers between) is not supported",
        r.path(), family);
  if (r.has("mlp_only_layers") && !r.is_empty_list("mlp_only_layers"))
    fail("'{}': {} with mlp_only_layers (dense layers) is not supported", r.path(), family);
}

// Qwen3-MoE's sparse blocks in every layer (decoder_sparse_step 1, no mlp_only_layers) with
// the chosen experts' weights renormalized (norm_topk_prob): what llama.cpp's qwen3moe runs.
void read_qwen3moe(const ConfigReader& r, HfConfig& c) {
  read_qwen(r, c, "qwen3moe");
  if (r.has("head_dim"))
    c.model.head_dim = r.whole("head_dim", 1, kU32);
  else
    head_dim_from_width(r, c);
  c.model.n_expert = r.whole("num_experts", 1, kMaxExperts);
  c.model.n_expert_used = r.whole("num_experts_per_tok", 1, c.model.n_expert);
  c.model.n_ff = r.whole("moe_intermediate_size", 1, kU32);
  if (!r.flag_or("norm_topk_prob", true))
    fail("'{}': Qwen3-MoE with norm_topk_prob false is not supported", r.path());
  require_every_layer_sparse(r, "Qwen3-MoE");
}

// Qwen2-MoE: Qwen2's attention (q/k/v biases); every layer a sparse block whose softmax weights
// are kept as they are (norm_topk_prob false, as llama.cpp's qwen2moe runs it) with a shared
// expert of shared_expert_intermediate_size neurons and its sigmoid gate.
void read_qwen2moe(const ConfigReader& r, HfConfig& c) {
  read_qwen(r, c, "qwen2moe");
  head_dim_from_width(r, c);
  c.model.n_expert = r.whole("num_experts", 1, kMaxExperts);
  c.model.n_expert_used = r.whole("num_experts_per_tok", 1, c.model.n_expert);
  c.model.n_ff = r.whole("moe_intermediate_size", 1, kU32);
  c.model.n_ff_shared = r.whole("shared_expert_intermediate_size", 1, kU32);
  if (r.flag_or("norm_topk_prob", false))
    fail("'{}': Qwen2-MoE with norm_topk_prob true is not supported", r.path());
  require_every_layer_sparse(r, "Qwen2-MoE");
}

// The routed experts stacked, then the shared expert and its gate (one row of n_embd).
LayerPlan qwen2moe_ffn(const HfConfig& c) {
  constexpr HfExpertNames kNames{"mlp.gate.weight", "mlp.experts.", "gate_proj", "up_proj",
                                 "down_proj"};
  const LayerPlan routed = stacked_experts(c, kNames);
  const ModelConfig m = c.model;
  return [routed, m](const std::string& g, const std::string& h, std::vector<Planned>& p) {
    routed(g, h, p);
    p.push_back({g + "ffn_gate_inp_shexp.weight", h + "mlp.shared_expert_gate.weight", 1,
                 m.n_embd});
    for (auto [name, hf, rows, cols] :
         {std::tuple{"ffn_gate_shexp", "gate_proj", m.n_ff_shared, m.n_embd},
          {"ffn_up_shexp", "up_proj", m.n_ff_shared, m.n_embd},
          {"ffn_down_shexp", "down_proj", m.n_embd, m.n_ff_shared}})
      p.push_back({g + name + ".weight", h + "mlp.shared_expert." + hf + ".weight", rows, cols});
  };
}

}  // namespace

const HfFamily& hf_qwen2moe_family() {
  static const HfFamily f{{"Qwen2MoeForCausalLM"},
                          read_qwen2moe,
                          [](const HfConfig& c, const auto& has) {
                            return plan_qwen(c, has, true, false, qwen2moe_ffn(c));
                          },
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

const HfFamily& hf_qwen3moe_family() {
  static const HfFamily f{{"Qwen3MoeForCausalLM"},
                          read_qwen3moe,
                          [](const HfConfig& c, const auto& has) {
                            // The router mlp.gate; each expert's gate_proj, up_proj and down_proj.
                            constexpr HfExpertNames kNames{"mlp.gate.weight", "mlp.experts.",
                                                           "gate_proj", "up_proj", "down_proj"};
                            return plan_qwen(c, has, false, true, stacked_experts(c, kNames));
                          },
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

const HfFamily& hf_qwen2_family() {
  static const HfFamily f{
      {"Qwen2ForCausalLM"},
      [](const ConfigReader& r, HfConfig& c) {
        read_qwen(r, c, "qwen2");
        head_dim_from_width(r, c);
      },
      [](const HfConfig& c, const auto& has) { return plan_qwen(c, has, true, false); },
      "model.embed_tokens.weight",
      "model.layers.{}.input_layernorm.weight"};
  return f;
}

const HfFamily& hf_qwen3_family() {
  static const HfFamily f{
      {"Qwen3ForCausalLM"},
      [](const ConfigReader& r, HfConfig& c) {
        read_qwen(r, c, "qwen3");
        if (r.has("head_dim"))
          c.model.head_dim = r.whole("head_dim", 1, kU32);
        else
          head_dim_from_width(r, c);
      },
      [](const HfConfig& c, const auto& has) { return plan_qwen(c, has, false, true); },
      "model.embed_tokens.weight",
      "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
