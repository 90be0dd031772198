// Writes LLaMA-shaped GGUF models with random weights: the tests' small models of every FFN
// variant and type, and large benchmark models. Weights stream to disk one tensor at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/config.h"
#include "tensor/dtype.h"

namespace strata {

struct SynthSpec {
  // Shape, FFN variant and name. head_dim (n_embd / n_head unless set) and n_rot follow when
  // written.
  ModelConfig shape;
  DType type = DType::F32;  // of the weight matrices; norms are always F32
  bool tied_output = false;
  uint64_t seed = 1;
  std::string tokenizer_from;  // copy tokenizer.* metadata from this GGUF (vocab must match)

  // Sparse by construction (ReLU-family FFN only; see docs/SPARSITY.md): about this share of
  // FFN neurons fire per token, with power-law hotness, and the file carries predictors of
  // predictor_rank plus ffn_down_t instead of ffn_down. 0: an ordinary dense random model.
  double density = 0.0;
  int64_t predictor_rank = 64;
  bool powerinfer_layout = false;  // "PWRI" magic, one global threshold, no strata FFN key
  bool keep_down = false;          // also write ffn_down (row-major), as llama.cpp files have
  // With density > 0: share of the residual that is local context (a windowed average of the
  // last few tokens, offline/synth_context.h), so neighbouring tokens share neurons. 0: none.
  double context = 0.0;
  // A mixture of experts (shape.n_expert > 0; llama and bamboo): each expert's gate, up and down
  // stacked in 3-D tensors as llama.cpp writes them since 2024, or (false) one 2-D tensor per
  // expert as older files have them.
  bool stacked_experts = true;
  // The routed experts' matrices' type (MXFP4 as in gpt-oss's files; llama-quantize's
  // MXFP4_MOE keeps the rest Q8_0); unset: `type`.
  std::optional<DType> expert_type;
};

// Named shapes: "tiny" (tests), "1b" (TinyLlama), "7b", "13b", "mixtral" (Mixtral-8x7B: 8
// experts, 2 per token), ...
SynthSpec synth_preset(const std::string& name);

// progress(bytes_written, bytes_total) is called after every tensor.
void write_synthetic_model(const SynthSpec& spec, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
