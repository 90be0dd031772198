// The weights of a LLaMA-family model, as views into the mapped GGUF file. Loading checks
// every tensor's presence, type and shape against the config before anything runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "tensor/matrix.h"

namespace strata {

struct LayerWeights {
  std::vector<float> attn_norm;
  MatrixView attn_q, attn_k, attn_v, attn_output;
  std::vector<float> ffn_norm;
  MatrixView ffn_gate, ffn_up, ffn_down;  // ffn_gate is empty for the relu variant
};

struct ModelWeights {
  MatrixView token_embd;  // n_vocab rows of n_embd
  std::vector<float> output_norm;
  MatrixView output;  // the embedding when the file has no output.weight (tied)
  bool tied_output = false;
  std::vector<LayerWeights> layers;

  // Bytes of weights a decode step reads: every layer matrix, the output matrix, one
  // embedding row. The basis of the bandwidth-limit figure in `strata bench`.
  uint64_t bytes_read_per_token() const;
};

ModelWeights load_weights(const GgufFile& file, ModelConfig& config);

}  // namespace strata
