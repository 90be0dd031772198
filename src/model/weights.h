// The weights of a model, as views into the mapped GGUF file. Loading walks the
// architecture's tensor list (model/arch/) and checks every tensor's presence, type and shape
// against the config before anything runs.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "model/tensor_scales.h"
#include "tensor/matrix.h"
#include "tiers/bundle_layout.h"
#include "tiers/column_bundle_layout.h"

namespace strata {

// A layer's activation predictor (PowerInfer's layout): scores = fc2 . relu(fc1 . u), where u is
// the residual stream entering the FFN *before* ffn_norm; neuron i is predicted active when
// scores[i] >= threshold. fc1 is rank rows of n_embd, fc2 n_ff rows of rank.
struct LayerPredictor {
  MatrixView fc1, fc2;
  float threshold = 0.0f;
  int64_t rank() const { return fc1.rows; }
  bool present() const { return fc1.data != nullptr; }
};

// One expert of a mixture-of-experts layer: an FFN of n_ff neurons (gate empty for the plain
// FFNs), its matrices views into the layer's stacked tensors (or its own, in older files).
struct ExpertMatrices {
  MatrixView gate, up, down;
};

// A layer's matrices; empty where the architecture has none. A fused q/k/v matrix is three
// row views here (attn_q, attn_k, attn_v into the one tensor).
struct LayerMatrices {
  MatrixView attn_q, attn_k, attn_v, attn_output;
  MatrixView ffn_gate, ffn_up;  // ffn_gate is empty for the plain FFNs (relu, gelu)
  // The down projection as stored: ffn_down is n_embd rows of n_ff (llama.cpp), ffn_down_t is
  // n_ff rows of n_embd (one neuron's output weights contiguous, for the sparse axpy). A file
  // has either or both; PowerInfer files have only ffn_down_t.
  MatrixView ffn_down, ffn_down_t;
  // A mixture-of-experts layer (ModelConfig::moe()): the router (n_expert rows of n_embd) and
  // the experts; ffn_gate, ffn_up and ffn_down are then empty.
  MatrixView ffn_gate_inp;
  std::vector<ExpertMatrices> experts;
  // A shared expert every token uses (Qwen2-MoE; empty: none): its FFN of n_ff_shared neurons
  // and its gate, one row of n_embd whose sigmoid weighs the expert's output (empty: weight 1,
  // GLM-4.5's). A mixture's leading dense layer holds its FFN here (n_ff_dense neurons).
  ExpertMatrices shared;
  MatrixView shared_gate;
};

// Every matrix of a mixture-of-experts layer (the router, then each expert's gate, up and down)
// with a name for messages: what loading, resident weights, layouts and byte counts walk.
template <typename Layer, typename Each>
void for_each_expert_matrix(Layer& l, Each&& each) {
  if (l.ffn_gate_inp.data != nullptr) each(l.ffn_gate_inp, std::string("ffn_gate_inp"));
  if (l.shared_gate.data != nullptr) each(l.shared_gate, std::string("ffn_gate_inp_shexp"));
  if (l.shared.up.data != nullptr) {
    if (l.shared.gate.data != nullptr) each(l.shared.gate, std::string("ffn_gate_shexp"));
    each(l.shared.up, std::string("ffn_up_shexp"));
    each(l.shared.down, std::string("ffn_down_shexp"));
  }
  for (size_t e = 0; e < l.experts.size(); ++e) {
    auto& x = l.experts[e];
    if (x.up.data == nullptr) continue;  // held by another device (a mixture split by expert)
    const std::string p = "expert " + std::to_string(e) + " ";
    if (x.gate.data != nullptr) each(x.gate, p + "ffn_gate");
    each(x.up, p + "ffn_up");
    each(x.down, p + "ffn_down");
  }
}

// The bytes of a mixture's routed experts (its router and shared expert apart); 0 for a dense
// layer.
uint64_t expert_bytes(const LayerMatrices& l);
// The bytes of a shared expert and its gate (read every token, like the router); 0: none.
uint64_t shared_expert_bytes(const LayerMatrices& l);

// A mixture's gate or up matrices as one matrix of n_expert * n_ff rows (the layer seen as one
// FFN, ModelConfig::ffn_neurons): a view over the stacked tensor. Null data where the experts'
// rows are not one run of memory (one tensor per expert, as older files have them).
MatrixView expert_neuron_rows(const std::vector<ExpertMatrices>& experts,
                              MatrixView ExpertMatrices::*member);

// Which part of the layer reads a tensor: the dense block, or the FFN (held by neuron).
enum class LayerBlock { Attention, Ffn };

// Every matrix of a layer once, with its member and a name for messages: the one list that
// loading, resident weights, layouts, byte counts and the inventory walk.
struct LayerMatrixSlot {
  LayerMatrix role;
  MatrixView LayerMatrices::*member;
  LayerBlock block;
  const char* name;
};
inline constexpr LayerMatrixSlot kLayerMatrixSlots[] = {
    {LayerMatrix::AttnQ, &LayerMatrices::attn_q, LayerBlock::Attention, "attn_q"},
    {LayerMatrix::AttnK, &LayerMatrices::attn_k, LayerBlock::Attention, "attn_k"},
    {LayerMatrix::AttnV, &LayerMatrices::attn_v, LayerBlock::Attention, "attn_v"},
    {LayerMatrix::AttnOutput, &LayerMatrices::attn_output, LayerBlock::Attention, "attn_output"},
    {LayerMatrix::FfnGate, &LayerMatrices::ffn_gate, LayerBlock::Ffn, "ffn_gate"},
    {LayerMatrix::FfnUp, &LayerMatrices::ffn_up, LayerBlock::Ffn, "ffn_up"},
    {LayerMatrix::FfnDown, &LayerMatrices::ffn_down, LayerBlock::Ffn, "ffn_down"},
    {LayerMatrix::FfnDownT, &LayerMatrices::ffn_down_t, LayerBlock::Ffn, "ffn_down_t"},
};

// A role's shape under the config: a matrix's [cols, rows] in GGUF order, a vector's length.
// Every vector (norms, biases) stays whole and resident with the dense blocks, the FFN's up
// bias too (n_ff floats, indexed by neuron id): none travels with neuron rows.
std::pair<int64_t, int64_t> layer_matrix_shape(LayerMatrix role, const ModelConfig& c);
int64_t layer_vector_length(LayerVector role, const ModelConfig& c);

struct LayerWeights : LayerMatrices {
  // By LayerVector; empty where the architecture (or this file) has none.
  std::array<std::vector<float>, kLayerVectors> vectors;
  const std::vector<float>& vec(LayerVector v) const { return vectors[static_cast<size_t>(v)]; }
  LayerPredictor predictor;
  // Bundled files (strata bundle): gate/up/down are absent; the layer's bundles start at this
  // absolute file offset and are read on demand by the flash tier.
  uint64_t bundles_offset = 0;
  // Column-bundled files (strata bundle --columns): the absolute file offsets of the layer's
  // gate/up and down column bundles (tiers/column_bundle_layout.h).
  uint64_t gate_up_columns_offset = 0, down_columns_offset = 0;
  ColumnBundleLayout column_bundle;  // the layer's (types may differ between layers)
  // Quantized column bundles: the scale planes of the layer's copies, in the file (RAM).
  const uint8_t* gate_up_column_scales = nullptr;
  const uint8_t* down_column_scales = nullptr;
};

struct ModelWeights {
  MatrixView token_embd;     // n_vocab rows of n_embd
  MatrixView position_embd;  // learned positions (OPT): rows of n_embd; empty otherwise
  std::vector<float> output_norm, output_norm_bias;  // the bias empty unless the norm has one
  MatrixView output;  // the embedding when the file has no output.weight (tied)
  bool tied_output = false;
  std::vector<float> output_bias;  // n_vocab values added to the logits (Qwen2); empty: none
  // Divisors of the rotary frequencies (rope_freqs.weight, n_rot / 2; Llama 3.1); empty: none.
  std::vector<float> rope_freqs;
  // LongRoPE's (Phi-3): the divisors for contexts past the original one, and within it.
  std::vector<float> rope_factors_long, rope_factors_short;
  // The divisors a session rotates with: rope_freqs, else LongRoPE's table for a sequence
  // context of n_ctx_seq (long past n_ctx_orig, as llama.cpp's get_rope_factors), else none.
  std::span<const float> rope_divisors(int64_t n_ctx_seq, int64_t n_ctx_orig) const {
    if (!rope_freqs.empty()) return rope_freqs;
    return n_ctx_seq > n_ctx_orig ? rope_factors_long : rope_factors_short;
  }
  OwnedMatrices owned;             // matrices made at load (tensor_scales.h)
  std::vector<std::string> notes;  // what loading did that a user should hear of
  std::vector<LayerWeights> layers;
  bool has_predictors = false;  // every layer has one
  bool has_down_t = false;      // every layer has ffn_down_t
  bool bundled = false;         // the FFN lives in neuron bundles (flash tier)
  int64_t experts_used = 0;     // a mixture of experts: experts a token uses (of each layer's)
  BundleLayout bundle;
  bool column_bundled = false;  // the FFN lives in column bundles (flash tier, TEAL)
  // Every layer's column-bundle layout (LayerWeights::column_bundle), in layer order.
  std::vector<ColumnBundleLayout> column_layouts() const;

  // Bytes of weights a decode step reads: every layer matrix (of a mixture, the router and
  // experts_used experts' share of the experts), the output matrix, one embedding row (and one
  // position row). The basis of the bandwidth-limit figure in
  // `strata bench`.
  uint64_t bytes_read_per_token() const;
};

// Metadata key of the per-layer predictor thresholds (f32 array); PowerInfer files have one
// global value under "powerinfer.sparse_threshold" instead.
inline constexpr const char* kPredictorThresholdsKey = "strata.predictor.thresholds";

ModelWeights load_weights(const GgufFile& file, ModelConfig& config);

}  // namespace strata
