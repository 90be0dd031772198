// strata bundle: rewrites a model with each layer's FFN as neuron bundles (tiers/bundle_layout.h)
// for the flash tier. Every other tensor (attention, norms, embeddings, predictors) is copied.
#pragma once

#include <functional>
#include <string>

#include "model/model.h"

namespace strata {

void write_bundled_model(const Model& model, const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
