// Hyper-parameters of a model, read from GGUF metadata with llama.cpp's keys, and its
// architecture (model/arch/architecture.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/arch/architecture.h"
#include "model/rope.h"
#include "model/expert_routing.h"
#include "tensor/ffn_activation.h"

namespace strata {

// How the FFN turns its input into the hidden activation h (then out = W_down h):
//   swiglu: h = silu(W_gate x) * (W_up x)        LLaMA, Mistral
//   reglu:  h = relu(W_gate x) * (W_up x)        ReluLLaMA, ProSparse
//   drelu:  h = relu(W_gate x) * relu(W_up x)    Bamboo, TurboSparse
//   geglu:  h = gelu(W_gate x) * (W_up x)        Gemma (gated GELU, tanh form)
//   relu:   h = relu(W_up x), no gate            OPT, ReluFalcon
//   gelu:   h = gelu(W_up x), no gate            Falcon
// strata records it under the metadata key "strata.ffn_activation". Without that key the
// architecture says (Architecture::ffn, ::powerinfer_ffn): a llama.cpp llama file is SwiGLU, a
// PowerInfer ("PWRI") llama file ReGLU.
const char* ffn_activation_name(FfnActivation a);
std::optional<FfnActivation> ffn_activation_from_name(const std::string& name);
std::string ffn_activation_names();  // "swiglu, reglu, ...": for messages and --help

inline constexpr const char* kFfnActivationKey = "strata.ffn_activation";
inline constexpr const char* kSlidingWindowKey = "strata.attention.sliding_window";

// The most experts a layer may have (DeepSeek-V3 and Qwen3-MoE have 256 and 128): a bound on
// what a damaged file can make strata allocate.
inline constexpr int64_t kMaxExperts = 512;

struct ModelConfig {
  std::string architecture;
  const Architecture* arch = &llama_architecture();  // never null
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  int64_t n_rot = 0;  // rotary dimensions per head (the first n_rot of head_dim)
  float rope_freq_base = 10000.0f;
  RopeScaling rope_scaling;  // <arch>.rope.scaling.*
  float norm_eps = 1e-5f;  // the architecture's norm's epsilon (RMSNorm or LayerNorm)
  FfnActivation ffn = FfnActivation::SwiGLU;
  // A mixture of experts (<arch>.expert_count, .expert_used_count): each layer's FFN is
  // n_expert FFNs of n_ff neurons behind a router, and a token uses n_expert_used of them (the
  // top k, model/expert_routing.h). 0: one dense FFN.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  // A shared expert beside the routed ones (Qwen2-MoE; <arch>.expert_shared_feed_forward_length):
  // its neurons, 0: none. Every token uses it.
  int64_t n_ff_shared = 0;
  // How the router weighs its experts (model/expert_routing.h): llama.cpp's
  // <arch>.expert_gating_func (softmax, or sigmoid with a per-layer correction bias), its
  // expert_weights_norm (the family's default: Architecture::renormalize_experts) and
  // expert_weights_scale (1: none), and DeepSeek's expert groups (expert_group_count,
  // expert_group_used_count; 1: none).
  ExpertGating expert_gating = ExpertGating::Softmax;
  bool expert_weights_norm = true;
  float expert_weights_scale = 1.0f;
  int64_t n_expert_groups = 1, n_group_used = 1;
  // A mixture's leading dense layers (GLM-4.5, DeepSeek: <arch>.leading_dense_block_count): the
  // first n_dense_lead layers have one dense FFN of n_ff_dense neurons (feed_forward_length), held
  // as a mixture layer whose only expert is that FFN, always used with weight 1.
  int64_t n_dense_lead = 0;
  int64_t n_ff_dense = 0;
  // Multi-token-prediction layers after the n_layer of the model (GLM-4.5's nextn layers,
  // <arch>.nextn_predict_layers, counted in block_count): loaded by no graph, accepted unused as
  // llama.cpp's text generation leaves them.
  int64_t n_layer_nextn = 0;
  bool moe() const { return n_expert > 0; }
  // Layer l routes its tokens to experts (a mixture's leading dense layers do not).
  bool routed(int64_t l) const { return moe() && l >= n_dense_lead; }
  RoutingRule routing() const {
    return {expert_gating, expert_weights_norm, expert_weights_scale, n_expert_groups,
            n_group_used};
  }
  // The FFN's neurons as the sparse modes see a layer: a mixture is one FFN of n_expert *
  // n_ff neurons (expert e's neuron j is neuron e * n_ff + j), so the router's choice is a
  // first selection of neurons and the predictor or the gate the second.
  int64_t ffn_neurons() const { return moe() ? n_expert * n_ff : n_ff; }
  // Sliding-window attention (Mistral's): a token attends to the last `sliding_window` positions
  // of its sequence, its own included. 0: to all of them. Under strata's own key
  // (kSlidingWindowKey): llama.cpp's graphs of these families attend to all positions whatever
  // <arch>.attention.sliding_window says, and strata reads their files as they do.
  int64_t sliding_window = 0;
  // Which layers slide that window (llama.cpp's iswa families: Gemma 2's every other layer,
  // Gemma 3's five of six): one flag per layer. Empty: every layer does when sliding_window > 0.
  std::vector<uint8_t> swa_layers;
  // The windowed layers' RoPE where it is their own (Gemma 3's local layers: base 10000, no
  // scaling, while its global layers have 1e6 and linear scaling): 0 means the full layers'.
  float rope_freq_base_swa = 0.0f;
  float rope_freq_scale_swa = 0.0f;
  // Attention's scores: q.k times attention_scale (0: 1 / sqrt(head_dim)), then soft-capped,
  // s = cap * tanh(s / cap), when attention_softcap > 0 (Gemma 2's attn_logit_softcapping).
  float attention_scale = 0.0f;
  float attention_softcap = 0.0f;
  // The logits soft-capped the same way (Gemma 2's final_logit_softcapping); 0: none.
  float final_softcap = 0.0f;

  // Layer l attends through the sliding window.
  bool windowed(int64_t l) const {
    if (sliding_window <= 0) return false;
    return swa_layers.empty() || swa_layers[static_cast<size_t>(l)] != 0;
  }
  // Whether the windowed layers rotate with a table of their own.
  bool swa_rope_differs() const;
  float score_scale() const;  // attention_scale, or 1 / sqrt(head_dim)

  // Reads and validates; fails naming the missing or inconsistent key.
  static ModelConfig from_gguf(const GgufFile& file);
};

class GgufWriter;
// Writes general.architecture, general.name, the "<arch>.*" hyper-parameters and the FFN
// variant: the keys from_gguf reads (and llama.cpp reads), named in one place.
// Fails (Error) where the loader would refuse the config once written (its float parameters as
// f32); write_config checks it first, and a converter calls it before creating its output.
void check_writable(const ModelConfig& config);
void write_config(const ModelConfig& config, GgufWriter& writer);

}  // namespace strata
