// What `strata convert` knows of one Hugging Face model family: the config.json classes it
// takes, how their hyperparameters become a ModelConfig, and the plan of GGUF tensors, each
// with the checkpoint tensor it comes from and how its rows are ordered. One file per family
// (hf_llama.cpp, hf_falcon.cpp, hf_opt.cpp, hf_qwen.cpp, hf_gemma.cpp, hf_phi3.cpp, hf_glm4moe.cpp); convert.cpp
// checks, streams and writes
// the plan.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "tensor/dtype.h"

namespace strata {

// config.json values are checked as strictly as strata checks a GGUF file, so convert never
// writes a file that strata then refuses, nor truncates a value silently (64.5 -> 64, 2^62 in
// a u32 -> 0).
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int64_t whole(const char* key, int64_t lo, int64_t hi) const;
  int64_t whole_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) const;
  double positive_or(const char* key, double fallback) const;
  std::string text_or(const char* key, const std::string& fallback) const;
  bool flag_or(const char* key, bool fallback) const;
  // A list of strings (Gemma 3's layer_types); absent or null: empty.
  std::vector<std::string> texts_or_empty(const char* key) const;
  bool is_empty_list(const char* key) const {  // absent, null or []
    return !has(key) || (j_[key].is_array() && j_[key].empty());
  }
  // A special token id: absent, null or a list (several EOS ids) give -1.
  int64_t token_id(const char* key, int64_t n_vocab) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
};

inline constexpr int64_t kU32 = UINT32_MAX;  // GGUF stores the sizes as u32

// config.json: the model's hyper-parameters (as strata's ModelConfig) plus what only matters
// while converting.
struct HfConfig {
  ModelConfig model;
  std::string architecture;  // Hugging Face's class name
  bool tied = false;
  int64_t bos = -1, eos = -1;
  bool two_norms = false;  // Falcon's new_decoder_architecture: ln_attn and ln_mlp
  std::vector<float> rope_freqs;  // Llama 3's rope_scaling as divisors (hf_rope_scaling.h)
  std::vector<float> rope_factors_long, rope_factors_short;  // LongRoPE's (Phi-3)
};

// One GGUF tensor of the plan. Output row r is checkpoint row source_row(r) (null: r). With
// `stack`, a 3-D tensor of stack.size() matrices of rows x cols, matrix e from the checkpoint
// tensor stack[e] (a mixture's experts, stacked as llama.cpp writes them); hf_name is unused.
struct Planned {
  std::string gguf_name, hf_name;
  int64_t rows, cols;  // cols == 0: a vector of `rows`
  std::function<int64_t(int64_t)> source_row = nullptr;
  DType type = DType::F16;
  std::vector<std::string> stack = {};
  // A vector made by the converter rather than read (rope_freqs): written as F32.
  std::vector<float> values = {};
  // Added to every value read (Gemma's RMSNorm weights: Hugging Face multiplies by 1 + w, GGUF
  // files store 1 + w, as llama.cpp's converter writes them).
  float shift = 0.0f;
  // The checkpoint tensor's rows where it has more than `rows` (the first `rows` are taken:
  // Gemma 3's embedding cut to its tokenizer); 0: rows.
  int64_t source_rows = 0;
  bool generated() const { return !values.empty(); }
  // The checkpoint tensors it is made of, in order (none when generated).
  std::vector<std::string> sources() const {
    if (generated()) return {};
    return stack.empty() ? std::vector{hf_name} : stack;
  }
};

struct HfFamily {
  std::vector<std::string> classes;  // config.json "architectures"[0] values it converts
  // Fills the ModelConfig (architecture, sizes, FFN variant, epsilon) from config.json.
  std::function<void(const ConfigReader&, HfConfig&)> read;
  // The tensors to write, in order; `has` tells which optional checkpoint tensors exist.
  std::function<std::vector<Planned>(const HfConfig&,
                                     const std::function<bool(const std::string&)>& has)>
      plan;
  std::string embedding;        // the checkpoint's embedding tensor
  std::string layer_norm_name;  // a tensor every layer has, "{}" for the layer number
  // The vocabulary is the tokenizer's where the embedding has more rows (Gemma 3, as llama.cpp's
  // converter cuts them); false: the embedding's, the tokenizer padded.
  bool vocab_from_tokenizer = false;
};

// The common sizes of a transformer config (hidden, layers, heads, vocabulary), under these
// keys; the caller checks the rest.
void read_common_sizes(const ConfigReader& r, HfConfig& c, const char* hidden, const char* layers,
                       const char* heads, const char* ff);

// head_dim = hidden / heads, which must divide (families without a head_dim key).
void head_dim_from_width(const ConfigReader& r, HfConfig& c);

// The plan of a LLaMA-like checkpoint (model.embed_tokens, model.norm, lm_head unless tied;
// per layer input_layernorm, the attention's q/k/v from `attention`, o_proj,
// post_attention_layernorm, the gate/up/down MLP), written in hf_llama.cpp; `attention` gets
// the layer's GGUF prefix ("blk.N.") and checkpoint prefix ("model.layers.N.").
// `ffn`, where given, plans the layer's FFN instead of the dense gate/up/down MLP.
using LayerPlan =
    std::function<void(const std::string& g, const std::string& h, std::vector<Planned>& p)>;
std::vector<Planned> plan_llama_like(const HfConfig& c,
                                     const std::function<bool(const std::string&)>& has,
                                     const LayerPlan& attention, const LayerPlan& ffn = nullptr);

// A mixture's FFN as llama.cpp writes it: the router (`router`, under the layer's checkpoint
// prefix; F32, never quantized) as ffn_gate_inp, and each expert's gate, up and down matrices
// stacked into ffn_{gate,up,down}_exps, expert e's from `experts` + "E." + their names.
struct HfExpertNames {
  const char* router;            // "block_sparse_moe.gate.weight"
  const char* experts;           // "block_sparse_moe.experts."
  const char *gate, *up, *down;  // "w1", "w3", "w2"
};
LayerPlan stacked_experts(const HfConfig& c, const HfExpertNames& names);

// LlamaForCausalLM's config (hf_llama.cpp), which Mistral and Mixtral share, and its attention:
// q/k rows permuted for GGUF's adjacent-pair rotation.
void read_llama_config(const ConfigReader& r, HfConfig& c);
LayerPlan llama_attention(const HfConfig& c);

const HfFamily& hf_llama_family();
const HfFamily& hf_falcon_family();
const HfFamily& hf_opt_family();
const HfFamily& hf_qwen2_family();
const HfFamily& hf_qwen3_family();
const HfFamily& hf_mixtral_family();
const HfFamily& hf_qwen3moe_family();
const HfFamily& hf_qwen2moe_family();
const HfFamily& hf_gemma2_family();  // hf_gemma.cpp, with Gemma 3
const HfFamily& hf_gemma3_family();
const HfFamily& hf_phi3_family();
const HfFamily& hf_glm4moe_family();

}  // namespace strata
