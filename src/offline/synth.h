// Writes LLaMA-shaped GGUF models with random weights: the tests' small models of every FFN
// variant and type, and large benchmark models. Weights stream to disk one tensor at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/config.h"
#include "tensor/dtype.h"

namespace strata {

struct SynthSpec {
  int64_t n_embd = 64;
  int64_t n_ff = 192;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_vocab = 256;
  int64_t n_ctx = 256;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  DType type = DType::F32;  // of the weight matrices; norms are always F32
  FfnActivation ffn = FfnActivation::SwiGLU;
  bool tied_output = false;
  uint64_t seed = 1;
  std::string name = "strata-synthetic";
  std::string tokenizer_from;  // copy tokenizer.* metadata from this GGUF (vocab must match)
};

// Named shapes: "tiny" (tests), "1b" (TinyLlama), "7b", "13b".
SynthSpec synth_preset(const std::string& name);

// progress(bytes_written, bytes_total) is called after every tensor.
void write_synthetic_model(const SynthSpec& spec, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
