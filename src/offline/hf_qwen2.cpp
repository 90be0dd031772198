// Qwen2ForCausalLM (Qwen2, Qwen2.5) as llama.cpp's converter writes it: LLaMA's tensors plus the
// q/k/v biases, q/k rows as Hugging Face has them (the GGUF qwen2 files rotate NeoX's halves, as
// HF does), the head tied to the embedding where tie_word_embeddings says so (the small models).
// A checkpoint that turns its sliding window on is refused: llama.cpp's qwen2 runs full attention.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read(const ConfigReader& r, HfConfig& c) {
  const std::string act = r.text_or("hidden_act", "silu");
  if (act != "silu") fail("'{}': hidden_act '{}' is not supported (silu)", r.path(), act);
  if (r.flag_or("use_sliding_window", false))
    fail("'{}': Qwen2 with use_sliding_window true is not supported", r.path());
  c.model.ffn = FfnActivation::SwiGLU;
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.architecture = "qwen2";
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-6));
  head_dim_from_width(r, c);
  c.tied = r.flag_or("tie_word_embeddings", false);
}

std::vector<Planned> plan(const HfConfig& c, const std::function<bool(const std::string&)>& has) {
  const ModelConfig& m = c.model;
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  std::vector<Planned> p;
  p.push_back({"token_embd.weight", "model.embed_tokens.weight", m.n_vocab, m.n_embd});
  p.push_back({"output_norm.weight", "model.norm.weight", m.n_embd, 0});
  if (!c.tied && has("lm_head.weight"))
    p.push_back({"output.weight", "lm_head.weight", m.n_vocab, m.n_embd});
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("model.layers.{}.", l);
    p.push_back({g + "attn_norm.weight", h + "input_layernorm.weight", m.n_embd, 0});
    p.push_back({g + "attn_q.weight", h + "self_attn.q_proj.weight", q_dim, m.n_embd});
    p.push_back({g + "attn_q.bias", h + "self_attn.q_proj.bias", q_dim, 0});
    p.push_back({g + "attn_k.weight", h + "self_attn.k_proj.weight", kv_dim, m.n_embd});
    p.push_back({g + "attn_k.bias", h + "self_attn.k_proj.bias", kv_dim, 0});
    p.push_back({g + "attn_v.weight", h + "self_attn.v_proj.weight", kv_dim, m.n_embd});
    p.push_back({g + "attn_v.bias", h + "self_attn.v_proj.bias", kv_dim, 0});
    p.push_back({g + "attn_output.weight", h + "self_attn.o_proj.weight", m.n_embd, q_dim});
    p.push_back({g + "ffn_norm.weight", h + "post_attention_layernorm.weight", m.n_embd, 0});
    p.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", m.n_embd, m.n_ff});
  }
  return p;
}

}  // namespace

const HfFamily& hf_qwen2_family() {
  static const HfFamily f{{"Qwen2ForCausalLM"},
                          read,
                          plan,
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
