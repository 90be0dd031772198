// How a model's FFN gets to the flash tier, as commands a user types: for the messages that say
// a model is too big (the plan, bundle, train-predictors), so each names the route that works
// for this model's FFN kind instead of a step that will refuse it.
#pragma once

#include <string>

#include "model/config.h"

namespace strata {

// ReLU-family FFNs: predictors, then neuron bundles (the bundle alone when the file has
// predictors); SwiGLU/GELU dense FFNs: TEAL thresholds, then column bundles; mixtures of
// SwiGLU experts: none yet (--mmap pages the file).
std::string flash_route(const ModelConfig& c, bool has_predictors);

}  // namespace strata
