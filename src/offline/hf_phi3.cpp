// Phi3ForCausalLM (Phi-3, Phi-3.5-mini, Phi-4-mini) as llama.cpp's converter writes it
// (conversion/phi.py): qkv_proj as one attn_qkv (query rows, then key, then value, as Hugging
// Face fuses them), gate_up_proj as one ffn_up of 2 n_ff rows (gate, then up), q/k rows as HF
// has them (NeoX's halves), partial_rotary_factor as rope.dimension_count (Phi-4-mini: 0.75),
// LongRoPE's long_factor and short_factor as rope_factors_long/short.weight
// (offline/hf_rope_scaling.cpp). The sliding window in Phi-3's configs is not carried: llama.cpp's
// phi3 loader disables it.

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_phi3(const ConfigReader& r, HfConfig& c) {
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu") fail("'{}': hidden_act '{}' is not supported (silu)", r.path(), act);
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  c.model.architecture = "phi3";
  c.model.ffn = FfnActivation::SwiGLU;
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-5));
  head_dim_from_width(r, c);
  const double part = r.positive_or("partial_rotary_factor", 1.0);
  const auto n_rot = static_cast<int64_t>(part * static_cast<double>(c.model.n_embd)) /
                     c.model.n_head;  // llama.cpp's int(rot_pct * n_embd) // n_head
  if (part > 1.0 || n_rot < 2 || n_rot % 2 != 0)
    fail(
        "'{}': partial_rotary_factor {} gives {} rotary dimensions; expected an even number "
        "from 2 to the head size {}",
        r.path(), part, n_rot, c.model.head_dim);
  c.model.n_rot = n_rot;
  c.tied = r.flag_or("tie_word_embeddings", false);
}

// LLaMA's plan (hf_llama.cpp) with Phi-3's fused attention and FFN tensors.
std::vector<Planned> plan_phi3(const HfConfig& c,
                               const std::function<bool(const std::string&)>& has) {
  const ModelConfig m = c.model;
  const int64_t qkv_rows = (m.n_head + 2 * m.n_head_kv) * m.head_dim;
  return plan_llama_like(
      c, has,
      [m, qkv_rows](const std::string& g, const std::string& h, std::vector<Planned>& p) {
        p.push_back({g + "attn_qkv.weight", h + "self_attn.qkv_proj.weight", qkv_rows, m.n_embd});
      },
      [m](const std::string& g, const std::string& h, std::vector<Planned>& p) {
        p.push_back({g + "ffn_up.weight", h + "mlp.gate_up_proj.weight", 2 * m.n_ff, m.n_embd});
        p.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", m.n_embd, m.n_ff});
      });
}

}  // namespace

const HfFamily& hf_phi3_family() {
  static const HfFamily f{{"Phi3ForCausalLM"},
                          read_phi3,
                          plan_phi3,
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
