// Helpers the families' read_hparams / write_hparams share: llama.cpp's per-layer patterns and
// bounded optional keys, each failing with one line naming the key.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace strata {

// An optional float key within [lo, hi], else `fallback`.
float optional_float(const GgufFile& f, const std::string& key, float fallback, double lo,
                     double hi);

// llama.cpp's load_swa_pattern: <arch>.attention.sliding_window_pattern as an array of one flag
// per layer (non-zero: windowed), or as a period n (layer l windowed unless l % n == n - 1;
// with dense_first, unless l % n == 0; n = 0: every layer), `period` when the key is absent.
void read_swa_pattern(const GgufFile& f, const std::string& prefix, uint32_t period,
                      bool dense_first, ModelConfig& c);
// The same key written as the per-layer array (what llama.cpp's model saver writes).
void write_swa_pattern(const ModelConfig& c, const std::string& prefix, GgufWriter& w);

// A mixture's router rule and layer layout as llama.cpp's loaders of GLM-4.5 and DeepSeek read
// them (keys after `prefix`): expert_gating_func (absent or 0: `gating`; 1 softmax, 2 sigmoid;
// others refused), expert_weights_norm (default false), expert_weights_scale (0 or absent: 1),
// leading_dense_block_count (default 0, at most the layers), expert_shared_count (required:
// the shared experts, each of n_ff neurons, as one FFN of n_ff x count) and
// nextn_predict_layers (taken off n_layer: they are counted in block_count).
void read_mixture_rule(const GgufFile& f, const std::string& prefix, ExpertGating gating,
                       ModelConfig& c);
void write_mixture_rule(const ModelConfig& c, const std::string& prefix, GgufWriter& w);

}  // namespace strata
