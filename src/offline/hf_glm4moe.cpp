// Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6) as llama.cpp's converter writes it
// (conversion/glm.py): q/k rows as Hugging Face has them (NeoX's halves), q/k/v biases where
// attention_bias, q_norm/k_norm where use_qk_norm, RoPE over head_dim x partial_rotary_factor
// (default 0.5); post_attention_layernorm as post_attention_norm; the first
// first_k_dense_replace layers' dense MLP (intermediate_size), the others' router mlp.gate
// (F32) with its e_score_correction_bias as exp_probs_b, the routed experts stacked
// (moe_intermediate_size) and the shared experts as one FFN (ffn_*_shexp). The router rule:
// sigmoid, norm_topk_prob, routed_scaling_factor. The multi-token-prediction layers
// (num_nextn_predict_layers, after the trunk) are not converted: no strata graph reads them.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_glm4moe(const ConfigReader& r, HfConfig& c) {
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu") fail("'{}': hidden_act '{}' is not supported (silu)", r.path(), act);
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  ModelConfig& m = c.model;
  m.architecture = "glm4moe";
  m.ffn = FfnActivation::SwiGLU;
  m.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, m.n_head);
  m.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-5));
  if (r.has("head_dim"))
    m.head_dim = r.whole("head_dim", 1, kU32);
  else
    head_dim_from_width(r, c);
  const double part = r.positive_or("partial_rotary_factor", 0.5);
  const auto n_rot = static_cast<int64_t>(static_cast<double>(m.head_dim) * part);
  if (part > 1.0 || n_rot < 2 || n_rot % 2 != 0)
    fail(
        "'{}': partial_rotary_factor {} gives {} rotary dimensions; expected an even number "
        "from 2 to the head size {}",
        r.path(), part, n_rot, m.head_dim);
  m.n_rot = n_rot;
  m.n_ff_dense = m.n_ff;
  m.n_expert = r.whole("n_routed_experts", 1, kMaxExperts);
  m.n_expert_used = r.whole("num_experts_per_tok", 1, m.n_expert);
  m.n_ff = r.whole("moe_intermediate_size", 1, kU32);
  m.n_ff_shared = m.n_ff * r.whole_or("n_shared_experts", 0, 64, 1);
  m.n_dense_lead = r.whole_or("first_k_dense_replace", 0, m.n_layer, 1);
  m.expert_gating = ExpertGating::Sigmoid;
  m.expert_weights_norm = r.flag_or("norm_topk_prob", true);
  m.expert_weights_scale = static_cast<float>(r.positive_or("routed_scaling_factor", 1.0));
  // llama.cpp's glm4moe chooses among all experts: a grouped router would be run otherwise.
  if (r.whole_or("n_group", 1, kU32, 1) != 1)
    fail("'{}': n_group {} (group-limited routing) is not what llama.cpp's glm4moe runs", r.path(),
         r.whole_or("n_group", 1, kU32, 1));
  c.tied = r.flag_or("tie_word_embeddings", false);
}

std::vector<Planned> plan_glm4moe(const HfConfig& c,
                                  const std::function<bool(const std::string&)>& has) {
  const ModelConfig m = c.model;
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const bool biases = has("model.layers.0.self_attn.q_proj.bias");
  const bool head_norms = has("model.layers.0.self_attn.q_norm.weight");
  const LayerPlan attention = [=](const std::string& g, const std::string& h, auto& p) {
    for (auto [name, hf, rows] : {std::tuple{"attn_q", "q_proj", q_dim},
                                  {"attn_k", "k_proj", kv_dim},
                                  {"attn_v", "v_proj", kv_dim}}) {
      p.push_back({g + name + ".weight", h + "self_attn." + hf + ".weight", rows, m.n_embd});
      if (biases) p.push_back({g + name + ".bias", h + "self_attn." + hf + ".bias", rows, 0});
    }
    if (head_norms) {
      p.push_back({g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", m.head_dim, 0});
      p.push_back({g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", m.head_dim, 0});
    }
  };
  const LayerPlan routed =
      stacked_experts(c, {"mlp.gate.weight", "mlp.experts.", "gate_proj", "up_proj", "down_proj"});
  const LayerPlan ffn = [=](const std::string& g, const std::string& h, auto& p) {
    const int64_t layer = std::stoll(g.substr(4));  // "blk.N."
    const auto dense = [&](const char* gguf, const std::string& hf, int64_t ff) {
      p.push_back({g + "ffn_gate" + gguf + ".weight", hf + "gate_proj.weight", ff, m.n_embd});
      p.push_back({g + "ffn_up" + gguf + ".weight", hf + "up_proj.weight", ff, m.n_embd});
      p.push_back({g + "ffn_down" + gguf + ".weight", hf + "down_proj.weight", m.n_embd, ff});
    };
    if (layer < m.n_dense_lead) {
      dense("", h + "mlp.", m.n_ff_dense);
      return;
    }
    routed(g, h, p);
    p.push_back({g + "exp_probs_b.bias", h + "mlp.gate.e_score_correction_bias", m.n_expert, 0});
    if (m.n_ff_shared > 0) dense("_shexp", h + "mlp.shared_experts.", m.n_ff_shared);
  };
  std::vector<Planned> plan = plan_llama_like(c, has, attention, ffn);
  for (Planned& t : plan)  // GLM's FFN norm under llama.cpp's name for it
    if (t.gguf_name.ends_with(".ffn_norm.weight"))
      t.gguf_name.replace(t.gguf_name.size() - std::string_view("ffn_norm.weight").size(),
                          std::string_view("ffn_norm").size(), "post_attention_norm");
  return plan;
}

}  // namespace

const HfFamily& hf_glm4moe_family() {
  static const HfFamily f{{"Glm4MoeForCausalLM"},
                          read_glm4moe,
                          plan_glm4moe,
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
