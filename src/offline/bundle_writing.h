// What the two bundle writers (offline/bundle.h: neuron bundles; offline/column_bundle.h:
// column bundles) share: the source model's metadata and its tensors other than the FFN's,
// which both carry unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "format/gguf_writer.h"
#include "model/model.h"

namespace strata {

// The source's metadata (not its alignment), the FFN variant, the bundles' type (id and name)
// and the source's content hash.
void set_bundle_metadata(GgufWriter& w, const Model& model, DType type);

// The source's tensors other than the FFN's gate, up and down (a mixture's experts too): kept as
// they are.
struct KeptTensors {
  std::vector<const GgufTensorInfo*> tensors;
  uint64_t bytes = 0;
};
// Declares them in `w` (before the bundles).
KeptTensors add_kept_tensors(GgufWriter& w, const Model& model);
// Writes their data; returns the bytes written.
uint64_t write_kept_tensors(GgufWriter& w, const KeptTensors& kept);

}  // namespace strata
