// strata bundle --columns: rewrites a model with each layer's FFN as column bundles
// (tiers/column_bundle_layout.h) for the flash tier's input-sparse products (TEAL). Every other
// tensor (attention, norms, embeddings) and the metadata (the calibrated thresholds included)
// are copied.
#pragma once

#include <functional>
#include <string>

#include "model/model.h"
#include "tiers/column_bundle_layout.h"

namespace strata {

// Fails with one line for what column bundles cannot hold: a mixture of experts, quantized FFN
// weights (their columns are slower than rows on the CPU), a file already bundled. Returns the
// layout written.
ColumnBundleLayout write_column_bundled_model(
    const Model& model, const std::string& path,
    const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace strata
