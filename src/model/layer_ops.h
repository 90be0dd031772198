// Which of the recipe's extra ops (backends/backend.h: LayerOp) a layer needs, from its
// family's fields: what a device must compute to take the layer (planning keeps it on the CPU
// otherwise, and a session refuses a device that lacks one).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"

namespace strata {

std::vector<LayerOp> layer_ops(const ModelConfig& config, int64_t layer);

}  // namespace strata
