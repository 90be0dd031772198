// An architecture as a recipe: how its layer is wired (norm, positions, residual order, FFN
// variant) and which tensors it has under which GGUF names. One small file per architecture
// (llama.cpp, falcon.cpp, opt.cpp, qwen.cpp) fills this in; the loader, the layer
// block, the resident weights, the inventory and the quantize rules all read it, so a tensor is
// named once and a tensor an architecture lacks is simply absent. docs/ARCHITECTURES.md: how to add
// one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tensor/ffn_activation.h"

namespace strata {

class GgufFile;
class GgufWriter;
struct ModelConfig;

enum class NormKind { Rms, Layer };  // RMSNorm (weight), LayerNorm (weight, bias if present)
// How a token's position enters: RoPE on adjacent pairs (GGUF llama files), RoPE on NeoX's
// halves (llama.cpp's falcon), or a learned table added to the embedding (OPT).
enum class PositionKind { RopeAdjacent, RopeNeox, Learned };
// Sequential: x += attn(norm(x)); x += ffn(norm2(x)). Parallel (Falcon): both read the
// layer's input, x += attn(norm(x)) + ffn(norm'(x)).
enum class ResidualKind { Sequential, Parallel };

// A layer's matrices and vectors by what they are. AttnQkv is a fused q/k/v matrix (rows q,
// then k, then v), split at load into three row views, so the rest of strata sees q, k and v;
// FfnGateUp likewise a fused gate and up.
enum class LayerMatrix : uint8_t {
  AttnQ,
  AttnK,
  AttnV,
  AttnQkv,
  AttnOutput,
  FfnGate,
  FfnUp,
  FfnDown,
  FfnDownT,
  FfnGateUp,  // a fused [gate; up] matrix (Phi-3's ffn_up, 2 n_ff rows), split at load into views
  Count
};
enum class LayerVector : uint8_t {
  AttnNorm,
  AttnNormBias,
  AttnNorm2,  // Falcon-40B's second input norm: attention's (attn_norm is then the MLP's)
  AttnNorm2Bias,
  FfnNorm,
  FfnNormBias,
  AttnQBias,
  AttnKBias,
  AttnVBias,
  AttnOutputBias,
  FfnUpBias,
  FfnDownBias,
  AttnQNorm,    // Qwen3's RMSNorm of each query head after its projection (head_dim values)
  AttnKNorm,    // and of each key head
  FfnGateBias,  // llama.cpp's optional MLP biases of a llama file (ffn_gate.bias)
  AttnPostNorm,  // Gemma 2/3's sandwich: RMSNorm of attention's output before the residual add
  FfnPostNorm,   // and of the FFN's
  AttnSinks,     // gpt-oss: one logit per query head in attention's softmax denominators
  RouterBias,    // gpt-oss: n_expert values added to the router's logits
  // gpt-oss: each expert's biases, stacked expert-major as its matrices (n_expert x n_ff for
  // gate and up, n_expert x n_embd for down)
  ExpertGateBias,
  ExpertUpBias,
  ExpertDownBias,
  // GLM-4.5, DeepSeek-V3: n_expert values added to the router's sigmoid scores for the choice
  // only (exp_probs_b; ExpertNames::selection_bias)
  ExpertSelectionBias,
  Count
};
inline constexpr int kLayerMatrices = static_cast<int>(LayerMatrix::Count);
inline constexpr int kLayerVectors = static_cast<int>(LayerVector::Count);

enum class Presence : uint8_t { Required, Optional };

// llama-quantize's exceptions by architecture for its mixtures. Falcon's: the output head Q8_0
// in every quantized file, ffn_down nearer the base type (Q3_K_M: Q3_K off the more-bits layers;
// Q4_K_M: Q6_K on layers 0-1, Q5_K on more-bits layers, else Q4_K; Q4_K_S: no extra bits) and
// attn_output without extra bits.
enum class QuantRules : uint8_t { Default, Falcon };

// A tensor of a layer under its GGUF name (after "blk.N."). A role may be listed twice (two
// names of one tensor, as PowerInfer names the down bias ffn_down_t.bias): the first found
// wins, and a required role needs one of them.
struct MatrixName {
  LayerMatrix role;
  const char* gguf;
  Presence presence = Presence::Required;
};
struct VectorName {
  LayerVector role;
  const char* gguf;
  Presence presence = Presence::Required;
};

// A mixture-of-experts layer's tensors under llama.cpp's names: the router (n_expert rows of
// n_embd) and the experts' gate, up and down matrices, either stacked expert-major in one 3-D
// tensor each ([n_embd, n_ff, n_expert]; down [n_ff, n_embd, n_expert]) or, in files written
// before llama.cpp stacked them (early 2024), one 2-D tensor per expert ("{}" is its number).
// An architecture whose files may hold experts names them; the layer is a mixture when the file
// says <arch>.expert_count.
// Qwen2-MoE adds a shared expert every token uses (its own FFN size,
// <arch>.expert_shared_feed_forward_length) whose output is weighed by sigmoid(shared_gate . x);
// GLM-4.5's and DeepSeek's shared experts have no gate (weight 1).
struct ExpertNames {
  const char* router;
  const char *gate, *up, *down;
  const char *gate_each, *up_each, *down_each;
  // The shared expert's gate (n_embd values; null: ungated) and matrices (null: none).
  const char* shared_gate = nullptr;
  const char *shared_ffn_gate = nullptr, *shared_ffn_up = nullptr, *shared_ffn_down = nullptr;
  // The router's correction bias (LayerVector::ExpertSelectionBias), required on every mixture
  // layer where named.
  const char* selection_bias = nullptr;
};

// Which per-tensor ".scale" tensors (FP8/NVFP4 conversions' scale2: the matrix's products are
// multiplied by it; shape [1], or [n_expert] for stacked experts) a family's llama.cpp graph
// applies. llama.cpp v0.5.0 loads them for every family but applies the FFN's only in some; where
// it does not, strata does not either (model/tensor_scales.h).
struct ScaleUse {
  bool attention = true;  // q, k, v (or the fused qkv) and the output projection
  bool ffn = false;       // a dense FFN's gate, up and down
  bool experts = false;   // a mixture's stacked experts (per expert)
};

struct Architecture {
  std::string_view name;  // general.architecture, and the prefix of its hyperparameter keys
  NormKind norm = NormKind::Rms;
  const char* norm_eps_key = "attention.layer_norm_rms_epsilon";  // after "<name>."
  PositionKind positions = PositionKind::RopeAdjacent;
  // Learned positions: position p reads row p + position_offset of position_embd (OPT: 2).
  int64_t position_offset = 0;
  ResidualKind residual = ResidualKind::Sequential;
  // The FFN variant of a file without strata.ffn_activation: llama.cpp's, and PowerInfer's
  // (PWRI) files.
  FfnActivation ffn = FfnActivation::SwiGLU;
  FfnActivation powerinfer_ffn = FfnActivation::SwiGLU;
  std::span<const MatrixName> matrices;
  std::span<const VectorName> vectors;
  bool output_norm_bias = false;  // output_norm.bias
  QuantRules quant_rules = QuantRules::Default;
  const ExpertNames* experts = nullptr;  // null: its files have no mixture-of-experts layers
  bool always_experts = false;           // its files are mixtures (qwen3moe), never dense
  // The chosen experts' softmax weights renormalized to sum to 1 (Mixtral, Qwen3-MoE's
  // norm_topk_prob); false: the softmax over all experts as it is (Qwen2-MoE).
  bool renormalize_experts = true;
  // Tensors llama.cpp's loader accepts for the family beyond the lists above:
  bool rope_freqs = false;   // rope_freqs.weight: a divisor per rotary frequency (Llama 3.1's
                             // long-context RoPE, written by llama.cpp's converter)
  bool output_bias = false;  // output.bias: n_vocab values added to the logits (Qwen2)
  // LongRoPE's two divisor tables, rope_factors_long.weight and rope_factors_short.weight (n_rot
  // / 2 each, for every layer; Phi-3): the long one where a sequence's context exceeds
  // rope.scaling.original_context_length, as llama.cpp chooses.
  bool rope_factor_pair = false;
  // The output head is always the embedding (Gemma 2: llama.cpp's loader reads no output.weight,
  // so a file with one is refused as having a tensor it does not read).
  bool head_is_embedding = false;
  // A fused q/k/v matrix where the family's files normally have three (llama.cpp's
  // create_tensor_qkv: attn_qkv.weight and attn_qkv.bias, split at load).
  bool fused_qkv_allowed = false;
  ScaleUse scales;
  // The embedding row times sqrt(n_embd) before the first layer (Gemma).
  bool scale_embedding = false;
  // The family's own hyper-parameters beyond the common ones (attention scale and soft-caps,
  // which layers slide a window and their RoPE: the recipe's per-layer fields in ModelConfig),
  // read with llama.cpp's keys and defaults after the common ones, and written back; null:
  // none. Each family's file defines them.
  void (*read_hparams)(const GgufFile& file, ModelConfig& config) = nullptr;
  void (*write_hparams)(const ModelConfig& config, GgufWriter& writer) = nullptr;
  // What every model of the family has beyond a shape (Gemma 3's RoPE bases, Gemma 2's caps):
  // strata synth's starting point. Null: nothing.
  void (*family_defaults)(ModelConfig& config) = nullptr;
  // Tensors llama.cpp loads but no text-generation graph reads (Qwen3's rerank head
  // cls.output.weight): accepted and left unused, as there.
  std::span<const char* const> unused_tensors;
  // The name strata writes for a role (synth, convert): the first listed.
  const char* gguf_name(LayerMatrix role) const;
  const char* gguf_name(LayerVector role) const;
  bool has(LayerMatrix role) const { return gguf_name(role) != nullptr; }
  bool has(LayerVector role) const { return gguf_name(role) != nullptr; }
  bool rope() const { return positions != PositionKind::Learned; }
};

// The architecture named by general.architecture, or null.
const Architecture* find_architecture(std::string_view name);
// "llama, bamboo, falcon, opt, qwen2, qwen3": for error messages.
std::string architecture_names();

// Each architecture's description (its own file).
const Architecture& llama_architecture();
const Architecture& bamboo_architecture();
const Architecture& falcon_architecture();
const Architecture& opt_architecture();
const Architecture& qwen2_architecture();  // qwen.cpp, with Qwen3
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& qwen2moe_architecture();
const Architecture& gemma2_architecture();  // gemma.cpp, with Gemma 3
const Architecture& gemma3_architecture();
const Architecture& phi3_architecture();
const Architecture& gpt_oss_architecture();
const Architecture& glm4moe_architecture();

// LLaMA's layer matrices (separate q, k, v and output; gate, up, down; PowerInfer's
// ffn_down_t), which the LLaMA-like families share.
std::span<const MatrixName> llama_layer_matrices();
// llama.cpp's expert tensor names (Mixtral is a llama file with experts).
const ExpertNames& llama_expert_names();

}  // namespace strata
