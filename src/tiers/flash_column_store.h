// The flash tier for input-sparse products (TEAL): a column-bundled model's FFN
// (tiers/column_bundle_layout.h) read through two RAM caches per layer, one of gate/up column
// bundles (rows: FFN inputs) and one of down column bundles (rows: neurons), each a windowed
// NeuronCache (neuron_cache.h) whose ids are column numbers. A product fetches the columns of its
// input's non-zero values and sums them from the cache's slots (runtime/column_products.h);
// more columns than a cache holds are fetched in passes.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "tensor/matrix.h"
#include "tiers/bundle_source.h"
#include "tiers/column_bundle_layout.h"
#include "tiers/neuron_cache.h"
#include "tiers/storage_profile.h"

namespace strata {

struct ColumnStoreOptions {
  // Share of each layer's column bundles its caches hold (gate/up and down alike), in (0, 1].
  double share = 1.0;
  int window = 5;
  int io_threads = 16;  // pread threads: reads in flight (io_uring keeps its own queue)
  const StorageProfile* storage = nullptr;
};

class FlashColumnStore {
 public:
  enum class Part { GateUp = 0, Down = 1 };
  struct Layer {
    ColumnBundleLayout layout;       // the layer's (types may differ between layers)
    uint64_t gate_up = 0, down = 0;  // absolute file offsets of the layer's first bundles
    // Quantized bundles: the scale planes of the layer's copies (in RAM; null for float types).
    const uint8_t* gate_up_scales = nullptr;
    const uint8_t* down_scales = nullptr;
  };
  // The smallest cache of `count` bundles a share gives: a pass holds at least this many, and
  // at least a pass unit (ColumnBundleLayout::pass_unit).
  static int64_t capacity_for(int64_t count, double share, int64_t unit = 1);
  // Inputs of a layer's part that a pass never splits (ColumnBundleLayout::pass_unit).
  int64_t pass_unit(int64_t layer, Part part) const {
    const ColumnBundleLayout& l = layers_[static_cast<size_t>(layer)].layout;
    return part == Part::GateUp ? l.gate_up_pass_unit() : l.down_pass_unit();
  }

  FlashColumnStore(std::vector<Layer> layers, BundleSource& source, ColumnStoreOptions options);

  // Bundles a cache holds (one pass's columns at most) and the values of each.
  int64_t capacity(int64_t layer, Part part) const { return cache(layer, part).capacity(); }
  int64_t values(Part part) const {
    const ColumnBundleLayout& l = layers_[0].layout;
    return part == Part::GateUp ? l.gate_up_values() : l.n_embd;
  }
  // Makes columns `ids` (ascending, distinct, at most capacity()) resident for the batch of
  // `batch` tokens ending at token number `token`, in pass `pass` of that batch's product;
  // slots[k] receives ids[k]'s slot. Returns the cache as a matrix whose rows are slots
  // (valid until the next fetch of this layer's part): columns of a float type, or rows of a
  // column-group copy with its scale plane (Layout::ColumnGroupSlots).
  MatrixView fetch(int64_t layer, Part part, std::span<const int32_t> ids, int32_t* slots,
                   int64_t token, int pass, int64_t batch);

  // Whether column `id` of the layer's part is in its cache now.
  bool resident(int64_t layer, Part part, int32_t id) const {
    return cache(layer, part).slot_of(id) >= 0;
  }
  NeuronCacheStats stats() const;  // summed over every cache
  uint64_t cache_bytes() const;    // the caches' buffers
  // Bytes of the caches' buffers and bookkeeping for layers of these layouts at `share`.
  static uint64_t bytes(std::span<const ColumnBundleLayout> layers, double share);

 private:
  NeuronCache& cache(int64_t layer, Part part) const {
    return *caches_[static_cast<size_t>(layer)][static_cast<size_t>(part)];
  }

  std::vector<Layer> layers_;
  BundleSource& source_;
  std::vector<std::array<std::unique_ptr<NeuronCache>, 2>> caches_;
  std::unique_ptr<ThreadPool> io_pool_;
};

}  // namespace strata
