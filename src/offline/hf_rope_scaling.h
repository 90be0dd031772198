// config.json's rope_scaling (rope_parameters in newer transformers) as llama.cpp's converter
// carries it into a GGUF file: "linear" and "yarn" as rope.scaling.* keys, Llama 3's "llama3" as
// the rope_freqs tensor (one divisor per rotary frequency, computed as its converter does), and
// "default" as nothing. Any other type, or a field strata would not carry (YaRN's beta_fast or
// attention_factor, a dynamic or LongRoPE scaling), is refused by name rather than dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/rope.h"

namespace strata {

struct HfRopeScaling {
  RopeScaling scaling;
  std::vector<float> rope_freqs;  // Llama 3's divisors (head_dim / 2); empty: none
};

// `config` is config.json; rope_theta and head_dim as read for the model; `rope_freqs_allowed`:
// the architecture reads rope_freqs (llama).
HfRopeScaling read_hf_rope_scaling(const nlohmann::json& config, const std::string& path,
                                   double rope_theta, int64_t head_dim, int64_t n_ctx_train,
                                   bool rope_freqs_allowed);

}  // namespace strata
