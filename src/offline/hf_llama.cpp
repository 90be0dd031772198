// LlamaForCausalLM and MistralForCausalLM (ReluLLaMA and ProSparse as hidden_act relu): q/k rows
// are permuted for GGUF's adjacent-pair rotary layout, as llama.cpp's converter does; Mistral's
// sliding_window becomes strata.attention.sliding_window (llama.cpp's llama graph attends to all positions).
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

// llama.cpp's q/k permutation: HF rotates dims (i, i + d/2) of each head; GGUF files rotate
// adjacent pairs, so row 2i of a head takes HF row i and row 2i+1 takes HF row i + d/2.
std::function<int64_t(int64_t)> permuted_heads(int64_t rows, int64_t heads) {
  return [rows, heads](int64_t row) {
    const int64_t hd = rows / heads, h = row / hd, r = row % hd;
    return h * hd + (r % 2) * (hd / 2) + r / 2;
  };
}

}  // namespace

void read_llama_config(const ConfigReader& r, HfConfig& c) {
  const std::string act = r.text_or("hidden_act", "silu");
  if (act == "silu")
    c.model.ffn = FfnActivation::SwiGLU;
  else if (act == "relu")
    c.model.ffn = FfnActivation::ReGLU;
  else
    fail("'{}': hidden_act '{}' is not supported (silu, relu)", r.path(), act);
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.architecture = "llama";  // Mistral is llama in GGUF
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-5));
  c.model.head_dim = r.whole_or("head_dim", 1, kU32, c.model.n_embd / c.model.n_head);
  // Mistral's and Mixtral's sliding window (null or absent: full attention).
  c.model.sliding_window = r.whole_or("sliding_window", 1, kU32, 0);
  c.tied = r.flag_or("tie_word_embeddings", false);
}

LayerPlan llama_attention(const HfConfig& c) {
  const ModelConfig m = c.model;
  return [m](const std::string& g, const std::string& h, std::vector<Planned>& p) {
    const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
    p.push_back({g + "attn_q.weight", h + "self_attn.q_proj.weight", q_dim, m.n_embd,
                 permuted_heads(q_dim, m.n_head)});
    p.push_back({g + "attn_k.weight", h + "self_attn.k_proj.weight", kv_dim, m.n_embd,
                 permuted_heads(kv_dim, m.n_head_kv)});
    p.push_back({g + "attn_v.weight", h + "self_attn.v_proj.weight", kv_dim, m.n_embd});
  };
}

std::vector<Planned> plan_llama_like(const HfConfig& c,
                                     const std::function<bool(const std::string&)>& has,
                                     const LayerPlan& attention, const LayerPlan& ffn) {
  const ModelConfig& m = c.model;
  std::vector<Planned> p;
  p.push_back({"token_embd.weight", "model.embed_tokens.weight", m.n_vocab, m.n_embd});
  p.push_back({"output_norm.weight", "model.norm.weight", m.n_embd, 0});
  if (!c.tied && has("lm_head.weight"))
    p.push_back({"output.weight", "lm_head.weight", m.n_vocab, m.n_embd});
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("model.layers.{}.", l);
    p.push_back({g + "attn_norm.weight", h + "input_layernorm.weight", m.n_embd, 0});
    attention(g, h, p);
    p.push_back(
        {g + "attn_output.weight", h + "self_attn.o_proj.weight", m.n_embd, m.n_head * m.head_dim});
    p.push_back({g + "ffn_norm.weight", h + "post_attention_layernorm.weight", m.n_embd, 0});
    if (ffn) {
      ffn(g, h, p);
      continue;
    }
    p.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", m.n_embd, m.n_ff});
  }
  return p;
}

LayerPlan stacked_experts(const HfConfig& c, const HfExpertNames& n) {
  const ModelConfig m = c.model;
  return [m, n](const std::string& g, const std::string& h, std::vector<Planned>& p) {
    p.push_back({g + "ffn_gate_inp.weight", h + n.router, m.n_expert, m.n_embd});
    for (auto [name, w, rows, cols] : {std::tuple{"ffn_gate_exps", n.gate, m.n_ff, m.n_embd},
                                       {"ffn_up_exps", n.up, m.n_ff, m.n_embd},
                                       {"ffn_down_exps", n.down, m.n_embd, m.n_ff}}) {
      Planned t{g + name + ".weight", "", rows, cols};
      for (int64_t e = 0; e < m.n_expert; ++e)
        t.stack.push_back(fmt::format("{}{}{}.{}.weight", h, n.experts, e, w));
      p.push_back(std::move(t));
    }
  };
}

const HfFamily& hf_llama_family() {
  static const HfFamily f{{"LlamaForCausalLM", "MistralForCausalLM"},
                          read_llama_config,
                          [](const HfConfig& c, const auto& has) {
                            return plan_llama_like(c, has, llama_attention(c));
                          },
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

}  // namespace strata
