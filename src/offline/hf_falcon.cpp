// FalconForCausalLM (and the older RWForCausalLM checkpoints' keys) as llama.cpp's converter
// writes it: the fused query_key_value's rows reordered to all query heads, then the key heads,
// then the value heads. Two layouts: multi_query (Falcon-7B: the fused rows are already q, k, v
// with one KV head; one input_layernorm) and new_decoder_architecture (Falcon-40B/180B: rows in
// groups of (q heads of the group, k, v) per KV head; ln_attn and ln_mlp). Rotary on halves
// (NeoX), as the GGUF falcon files keep it: no permutation. ALiBi checkpoints (Falcon-RW) are
// refused.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_falcon(const ConfigReader& r, HfConfig& c) {
  const bool old_keys = !r.has("hidden_size") && r.has("n_embd");  // RWForCausalLM
  read_common_sizes(r, c, old_keys ? "n_embd" : "hidden_size",
                    old_keys ? "n_layer" : "num_hidden_layers",
                    old_keys ? "n_head" : "num_attention_heads", nullptr);
  if (r.flag_or("alibi", false)) fail("'{}': ALiBi Falcon models are not supported", r.path());
  if (!r.flag_or("parallel_attn", true) || r.flag_or("bias", false))
    fail("'{}': Falcon with sequential attention or biases is not supported", r.path());
  c.two_norms = r.flag_or("new_decoder_architecture", false);
  const bool multi_query = r.flag_or("multi_query", true);
  if (c.two_norms)
    c.model.n_head_kv = r.whole_or("num_kv_heads", 1, kU32, r.whole_or("n_head_kv", 1, kU32, 1));
  else if (multi_query)
    c.model.n_head_kv = 1;
  else
    fail("'{}': Falcon without multi_query or new_decoder_architecture is not supported", r.path());
  c.model.n_ff = r.whole_or("ffn_hidden_size", 1, kU32, 4 * c.model.n_embd);
  c.model.architecture = "falcon";
  const std::string act = r.text_or("activation", "gelu");
  if (act == "gelu")
    c.model.ffn = FfnActivation::GELU;
  else if (act == "relu")  // ReluFalcon
    c.model.ffn = FfnActivation::ReLU;
  else
    fail("'{}': activation '{}' is not supported (gelu, relu)", r.path(), act);
  c.model.norm_eps = static_cast<float>(r.positive_or("layer_norm_epsilon", 1e-5));
  head_dim_from_width(r, c);
  c.tied = r.flag_or("tie_word_embeddings", true);
}

// GGUF row r of the fused q/k/v -> checkpoint row. New layout: per KV group g, the group's
// q heads, then its k head, then its v head.
std::function<int64_t(int64_t)> grouped_qkv(const ModelConfig& m) {
  const int64_t hd = m.head_dim, per_group = m.n_head / m.n_head_kv, stride = per_group + 2;
  const int64_t q_rows = m.n_head * hd, kv_rows = m.n_head_kv * hd;
  return [=](int64_t r) {
    if (r < q_rows) {
      const int64_t head = r / hd;
      return ((head / per_group) * stride + head % per_group) * hd + r % hd;
    }
    const bool value = r >= q_rows + kv_rows;
    const int64_t k = r - q_rows - (value ? kv_rows : 0), group = k / hd;
    return (group * stride + per_group + (value ? 1 : 0)) * hd + k % hd;
  };
}

std::vector<Planned> plan_falcon(const HfConfig& c,
                                 const std::function<bool(const std::string&)>& has) {
  const ModelConfig& m = c.model;
  const int64_t qkv = (m.n_head + 2 * m.n_head_kv) * m.head_dim;
  std::vector<Planned> p;
  p.push_back({"token_embd.weight", "transformer.word_embeddings.weight", m.n_vocab, m.n_embd});
  p.push_back({"output_norm.weight", "transformer.ln_f.weight", m.n_embd, 0});
  p.push_back({"output_norm.bias", "transformer.ln_f.bias", m.n_embd, 0});
  if (!c.tied && has("lm_head.weight"))
    p.push_back({"output.weight", "lm_head.weight", m.n_vocab, m.n_embd});
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("transformer.h.{}.", l);
    // Two norms: llama.cpp's names, ln_mlp as attn_norm and ln_attn as attn_norm_2.
    const std::string attn_norm = c.two_norms ? "ln_mlp" : "input_layernorm";
    p.push_back({g + "attn_norm.weight", h + attn_norm + ".weight", m.n_embd, 0});
    p.push_back({g + "attn_norm.bias", h + attn_norm + ".bias", m.n_embd, 0});
    if (c.two_norms) {
      p.push_back({g + "attn_norm_2.weight", h + "ln_attn.weight", m.n_embd, 0});
      p.push_back({g + "attn_norm_2.bias", h + "ln_attn.bias", m.n_embd, 0});
    }
    p.push_back({g + "attn_qkv.weight", h + "self_attention.query_key_value.weight", qkv, m.n_embd,
                 c.two_norms ? grouped_qkv(m) : nullptr});
    p.push_back({g + "attn_output.weight", h + "self_attention.dense.weight", m.n_embd,
                 m.n_head * m.head_dim});
    p.push_back({g + "ffn_up.weight", h + "mlp.dense_h_to_4h.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_down.weight", h + "mlp.dense_4h_to_h.weight", m.n_embd, m.n_ff});
  }
  return p;
}

}  // namespace

const HfFamily& hf_falcon_family() {
  static const HfFamily f{{"FalconForCausalLM", "RWForCausalLM"},
                          read_falcon,
                          plan_falcon,
                          "transformer.word_embeddings.weight",
                          "transformer.h.{}.self_attention.dense.weight"};
  return f;
}

}  // namespace strata
