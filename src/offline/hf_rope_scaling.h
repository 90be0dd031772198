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
  std::vector<float> rope_freqs;  // Llama 3's divisors (n_rot / 2); empty: none
  // LongRoPE's ("longrope", "su": Phi-3) divisor tables (n_rot / 2 each), written as
  // rope_factors_long/short.weight with rope.scaling.attn_factor sqrt(1 + ln(s) / ln(orig))
  // (s = max_position_embeddings / original_max_position_embeddings) and the original context,
  // as llama.cpp's converter writes them; empty: none.
  std::vector<float> long_factors, short_factors;
};

// What the architecture reads beside the keys: rope_freqs (llama), LongRoPE's tables (phi3).
struct RopeTensorsAllowed {
  bool rope_freqs = false;
  bool factor_pair = false;
};

// `config` is config.json; rope_theta and the rotary dimensions (n_rot) as read for the model.
HfRopeScaling read_hf_rope_scaling(const nlohmann::json& config, const std::string& path,
                                   double rope_theta, int64_t n_rot, int64_t n_ctx_train,
                                   RopeTensorsAllowed allowed);

}  // namespace strata
