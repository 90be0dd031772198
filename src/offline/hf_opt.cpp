// OPTForCausalLM as PowerInfer's `opt` files hold it: the learned position table whole (its
// first two rows are HF's offset), LayerNorms and every projection with biases, the head tied
// to the embedding. Post-norm OPT (350M: do_layer_norm_before false) and a projected embedding
// (word_embed_proj_dim != hidden_size) are refused.
#include <fmt/format.h>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_opt(const ConfigReader& r, HfConfig& c) {
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim");
  if (!r.flag_or("do_layer_norm_before", true))
    fail("'{}': OPT with do_layer_norm_before false (post-norm) is not supported", r.path());
  if (r.whole_or("word_embed_proj_dim", 1, kU32, c.model.n_embd) != c.model.n_embd)
    fail("'{}': OPT with word_embed_proj_dim != hidden_size is not supported", r.path());
  if (!r.flag_or("enable_bias", true) || !r.flag_or("layer_norm_elementwise_affine", true))
    fail("'{}': OPT without biases or norm weights is not supported", r.path());
  const std::string act = r.text_or("activation_function", "relu");
  if (act != "relu") fail("'{}': activation_function '{}' is not supported (relu)", r.path(), act);
  c.model.n_head_kv = c.model.n_head;
  c.model.architecture = "opt";
  c.model.ffn = FfnActivation::ReLU;
  c.model.norm_eps = 1e-5f;  // torch.nn.LayerNorm's default, which OPT keeps
  head_dim_from_width(r, c);
  c.tied = r.flag_or("tie_word_embeddings", true);
}

std::vector<Planned> plan_opt(const HfConfig& c,
                              const std::function<bool(const std::string&)>& has) {
  const ModelConfig& m = c.model;
  const int64_t positions = m.n_ctx_train + opt_architecture().position_offset;
  const std::string d = "model.decoder.";
  std::vector<Planned> p;
  p.push_back({"token_embd.weight", d + "embed_tokens.weight", m.n_vocab, m.n_embd});
  p.push_back({"position_embd.weight", d + "embed_positions.weight", positions, m.n_embd});
  p.push_back({"output_norm.weight", d + "final_layer_norm.weight", m.n_embd, 0});
  p.push_back({"output_norm.bias", d + "final_layer_norm.bias", m.n_embd, 0});
  if (!c.tied && has("lm_head.weight"))
    p.push_back({"output.weight", "lm_head.weight", m.n_vocab, m.n_embd});
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("{}layers.{}.", d, l);
    auto both = [&](const std::string& gguf, const std::string& hf, int64_t rows, int64_t cols) {
      p.push_back({g + gguf + ".weight", h + hf + ".weight", rows, cols});
      p.push_back({g + gguf + ".bias", h + hf + ".bias", rows, 0});  // one per output
    };
    both("attn_norm", "self_attn_layer_norm", m.n_embd, 0);
    both("attn_q", "self_attn.q_proj", m.n_embd, m.n_embd);
    both("attn_k", "self_attn.k_proj", m.n_embd, m.n_embd);
    both("attn_v", "self_attn.v_proj", m.n_embd, m.n_embd);
    both("attn_output", "self_attn.out_proj", m.n_embd, m.n_embd);
    both("ffn_norm", "final_layer_norm", m.n_embd, 0);
    both("ffn_up", "fc1", m.n_ff, m.n_embd);
    both("ffn_down", "fc2", m.n_embd, m.n_ff);
  }
  return p;
}

}  // namespace

const HfFamily& hf_opt_family() {
  static const HfFamily f{{"OPTForCausalLM"},
                          read_opt,
                          plan_opt,
                          "model.decoder.embed_tokens.weight",
                          "model.decoder.layers.{}.self_attn_layer_norm.weight"};
  return f;
}

}  // namespace strata
