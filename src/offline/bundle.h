// strata bundle: rewrites a model with each layer's FFN as neuron bundles (tiers/bundle_layout.h)
// for the flash tier. Every other tensor (attention, norms, embeddings, predictors) is copied.
#pragma once

#include <functional>
#include <string>

#include "model/model.h"

namespace strata {

struct BundleReport {
  DType type;              // of every row in the bundles (the model's ffn_up type)
  int requantized_layers;  // layers with gate/up/down rows of another type, requantized to it
};

// A bundle holds a neuron's rows in one type, ffn_up's: rows of another type (the Q6_K ffn_down
// layers of a Q4_K_M mixture) are dequantized and requantized to it, so such a file's bundles
// lose those layers' extra bits (the report counts them).
BundleReport write_bundled_model(const Model& model, const std::string& path,
                                 const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
