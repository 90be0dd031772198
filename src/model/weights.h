// The weights of a LLaMA-family model, as views into the mapped GGUF file. Loading checks
// every tensor's presence, type and shape against the config before anything runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "tensor/matrix.h"
#include "tiers/bundle_layout.h"

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

struct LayerWeights {
  std::vector<float> attn_norm;
  MatrixView attn_q, attn_k, attn_v, attn_output;
  std::vector<float> ffn_norm;
  MatrixView ffn_gate, ffn_up;  // ffn_gate is empty for the relu variant
  // The down projection as stored: ffn_down is n_embd rows of n_ff (llama.cpp), ffn_down_t is
  // n_ff rows of n_embd (one neuron's output weights contiguous, for the sparse axpy). A file
  // has either or both; PowerInfer files have only ffn_down_t.
  MatrixView ffn_down, ffn_down_t;
  LayerPredictor predictor;
  // Bundled files (strata bundle): gate/up/down are absent; the layer's bundles start at this
  // absolute file offset and are read on demand by the flash tier.
  uint64_t bundles_offset = 0;
};

struct ModelWeights {
  MatrixView token_embd;  // n_vocab rows of n_embd
  std::vector<float> output_norm;
  MatrixView output;  // the embedding when the file has no output.weight (tied)
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  bool has_predictors = false;  // every layer has one
  bool has_down_t = false;      // every layer has ffn_down_t
  bool bundled = false;         // the FFN lives in neuron bundles (flash tier)
  BundleLayout bundle;

  // Bytes of weights a decode step reads: every layer matrix, the output matrix, one
  // embedding row. The basis of the bandwidth-limit figure in `strata bench`.
  uint64_t bytes_read_per_token() const;
};

// Metadata key of the per-layer predictor thresholds (f32 array); PowerInfer files have one
// global value under "powerinfer.sparse_threshold" instead.
inline constexpr const char* kPredictorThresholdsKey = "strata.predictor.thresholds";

ModelWeights load_weights(const GgufFile& file, ModelConfig& config);

}  // namespace strata
