// strata bundle --columns: rewrites a model with each layer's FFN as column bundles
// (tiers/column_bundle_layout.h) for the flash tier's input-sparse products (TEAL). Every other
// tensor (attention, norms, embeddings) and the metadata (the calibrated thresholds included)
// are copied.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "tiers/column_bundle_layout.h"

namespace strata {

// Float FFNs become columns, quantized ones (Q8_0, Q4_0, Q2_K..Q6_K) rows of their column-group
// copies with the copies' scale planes beside them (tiers/column_bundle_layout.h). Fails with
// one line for what column bundles cannot hold: a mixture of experts, float and quantized FFN
// weights together, a layer's gate and up of two types, a shape the copies do not fit, a file
// already bundled. A layer's down may have another type than its gate/up (llama.cpp's _M
// mixtures). Returns each layer's layout.
std::vector<ColumnBundleLayout> write_column_bundled_model(
    const Model& model, const std::string& path,
    const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
