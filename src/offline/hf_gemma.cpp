// Gemma2ForCausalLM and Gemma3ForCausalLM (Gemma 3's text models) as llama.cpp's converter writes
// them (conversion/gemma.py): every RMSNorm weight stored as 1 + w (Hugging Face's Gemma norms
// multiply by 1 + w), q/k rows as Hugging Face has them (NeoX's halves), the embedding as the
// head (Gemma 2 has no lm_head; Gemma 3 ties it). The layer's four norms: input_layernorm
// (attn_norm), post_attention_layernorm (post_attention_norm), pre_feedforward_layernorm
// (ffn_norm), post_feedforward_layernorm (post_ffw_norm); Gemma 3 adds q_norm and k_norm.
// Keys: the soft caps and the window (Gemma 2's pattern is llama.cpp's default, every other
// layer); Gemma 3's layer_types (or its sliding_window_pattern) as one flag per layer and
// rope_local_base_freq as rope.freq_base_swa, which llama.cpp's converter leaves to its loader's
// defaults (6, 10000): written, they hold for checkpoints that differ. query_pre_attn_scalar is
// not a GGUF key: llama.cpp's loader derives the scale from the layer count, so a checkpoint
// whose scalar differs from that rule is refused rather than converted into another model.
#include <fmt/format.h>

#include <algorithm>

#include "offline/hf_family.h"

namespace strata {

namespace {

void read_gemma_common(const ConfigReader& r, HfConfig& c, const char* arch) {
  const std::string act =
      r.text_or("hidden_activation", r.text_or("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    fail("'{}': hidden_activation '{}' is not supported (gelu_pytorch_tanh)", r.path(), act);
  c.model.architecture = arch;
  c.model.arch = find_architecture(arch);
  c.model.ffn = FfnActivation::GeGLU;
  read_common_sizes(r, c, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size");
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.head_dim = r.whole_or("head_dim", 1, kU32, 256);
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-6));
  c.tied = true;
  // The scale llama.cpp will use for this file (model/arch/gemma.cpp's rule).
  const int64_t layers_27b = c.model.architecture == "gemma2" ? 46 : 62;
  const int64_t scalar =
      c.model.n_layer == layers_27b ? c.model.n_embd / c.model.n_head : c.model.head_dim;
  const double given = r.positive_or("query_pre_attn_scalar", static_cast<double>(scalar));
  if (given != static_cast<double>(scalar))
    fail(
        "'{}': query_pre_attn_scalar {} differs from the {} llama.cpp derives for {} layers "
        "(GGUF files carry no such key)",
        r.path(), given, scalar, c.model.n_layer);
}

void read_gemma2(const ConfigReader& r, HfConfig& c) {
  read_gemma_common(r, c, "gemma2");
  c.model.sliding_window = r.whole_or("sliding_window", 1, kU32, 4096);
  c.model.attention_softcap = static_cast<float>(r.positive_or("attn_logit_softcapping", 50.0));
  c.model.final_softcap = static_cast<float>(r.positive_or("final_logit_softcapping", 30.0));
}

// Which layers slide: layer_types where given, else every pattern-th layer global.
std::vector<uint8_t> gemma3_windowed_layers(const ConfigReader& r, int64_t n_layer) {
  const std::vector<std::string> types = r.texts_or_empty("layer_types");
  std::vector<uint8_t> out;
  if (!types.empty()) {
    if (static_cast<int64_t>(types.size()) != n_layer)
      fail("'{}': layer_types has {} entries for {} layers", r.path(), types.size(), n_layer);
    for (const std::string& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        fail("'{}': layer_types holds '{}' (sliding_attention, full_attention)", r.path(),
             t.substr(0, 32));
      out.push_back(t == "sliding_attention");
    }
    return out;
  }
  const int64_t period = r.whole_or("sliding_window_pattern", 1, kU32, 6);
  for (int64_t l = 0; l < n_layer; ++l) out.push_back((l + 1) % period != 0);
  return out;
}

void read_gemma3(const ConfigReader& r, HfConfig& c) {
  read_gemma_common(r, c, "gemma3");
  if (r.has("attn_logit_softcapping"))
    fail("'{}': attn_logit_softcapping is set; Gemma 3 has none", r.path());
  c.model.rope_freq_base = 1e6f;  // rope_theta's default (convert reads the key after this)
  c.model.final_softcap = r.has("final_logit_softcapping")  // null: none
                              ? static_cast<float>(r.positive_or("final_logit_softcapping", 1.0))
                              : 0.0f;
  c.model.swa_layers = gemma3_windowed_layers(r, c.model.n_layer);
  const bool any = std::find(c.model.swa_layers.begin(), c.model.swa_layers.end(), 1) !=
                   c.model.swa_layers.end();
  c.model.sliding_window = any ? r.whole("sliding_window", 1, kU32) : 0;
  if (!any) c.model.swa_layers.clear();
  c.model.rope_freq_base_swa = static_cast<float>(r.positive_or("rope_local_base_freq", 10000.0));
  c.model.rope_freq_scale_swa = 1.0f;
}

std::vector<Planned> plan_gemma(const HfConfig& c, bool head_norms) {
  const ModelConfig& m = c.model;
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  auto norm = [](std::string g, std::string h, int64_t n) {
    Planned p{std::move(g), std::move(h), n, 0};
    p.shift = 1.0f;
    return p;
  };
  std::vector<Planned> p;
  p.push_back({"token_embd.weight", "model.embed_tokens.weight", m.n_vocab, m.n_embd});
  p.push_back(norm("output_norm.weight", "model.norm.weight", m.n_embd));
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("model.layers.{}.", l);
    p.push_back(norm(g + "attn_norm.weight", h + "input_layernorm.weight", m.n_embd));
    for (auto [name, hf, rows] : {std::tuple{"attn_q", "q_proj", q_dim},
                                  {"attn_k", "k_proj", kv_dim},
                                  {"attn_v", "v_proj", kv_dim}})
      p.push_back({g + name + ".weight", h + "self_attn." + hf + ".weight", rows, m.n_embd});
    if (head_norms) {
      p.push_back(norm(g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", m.head_dim));
      p.push_back(norm(g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", m.head_dim));
    }
    p.push_back({g + "attn_output.weight", h + "self_attn.o_proj.weight", m.n_embd, q_dim});
    p.push_back(
        norm(g + "post_attention_norm.weight", h + "post_attention_layernorm.weight", m.n_embd));
    p.push_back(norm(g + "ffn_norm.weight", h + "pre_feedforward_layernorm.weight", m.n_embd));
    p.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", m.n_ff, m.n_embd});
    p.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", m.n_embd, m.n_ff});
    p.push_back(
        norm(g + "post_ffw_norm.weight", h + "post_feedforward_layernorm.weight", m.n_embd));
  }
  return p;
}

}  // namespace

const HfFamily& hf_gemma2_family() {
  static const HfFamily f{{"Gemma2ForCausalLM"},
                          read_gemma2,
                          [](const HfConfig& c, const auto&) { return plan_gemma(c, false); },
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight"};
  return f;
}

// Gemma 3's multimodal checkpoints (4B, 12B, 27B) convert as their text model: text_config's
// keys, the language model's tensors (convert.cpp's text_model_name), the vision tower left to
// llama.cpp's mmproj files.
const HfFamily& hf_gemma3_family() {
  static const HfFamily f{{"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
                          read_gemma3,
                          [](const HfConfig& c, const auto&) { return plan_gemma(c, true); },
                          "model.embed_tokens.weight",
                          "model.layers.{}.input_layernorm.weight",
                          /*vocab_from_tokenizer=*/true};
  return f;
}

}  // namespace strata
