// Where a session's FFN neurons are read from in the sparse modes and for bundled models: the
// RAM matrices, the flash tier's neuron or column caches over the model file, a split's device
// rows over either (the construction of the stores; the session's loop is session.cpp).
#include <algorithm>

#include "runtime/device_part.h"
#include "runtime/session.h"
#include "tiers/flash_column_store.h"
#include "tiers/flash_ffn_store.h"
#include "tiers/split_ffn_store.h"

namespace strata {

FfnStore* Session::make_stores() {
  if (model_.weights.bundled) flash_ = make_flash_store();
  if (options_.vram_neurons.empty()) return flash_ ? flash_.get() : &parts_[0]->ram_store();
  // The device part holds its copies of the hot rows, taken from the store below (the flash
  // tier, or the model's matrices in RAM: the host's rows), which serves the rest.
  DevicePart& host = cpu_part() != nullptr ? *cpu_part() : *parts_[0];
  FfnStore& below = flash_ ? *flash_ : host.ram_store();
  split_ =
      std::make_unique<SplitFfnStore>(backend_, below, options_.vram_neurons, c_.ffn_neurons(),
                                      max_batch_);
  return split_.get();
}

BundleSource& Session::bundle_source() {
  if (options_.source != nullptr) return *options_.source;
  if (own_source_ == nullptr) own_source_ = open_bundle_source(model_.file->path());
  return *own_source_;
}

std::unique_ptr<FlashColumnStore> Session::make_column_store() {
  std::vector<FlashColumnStore::Layer> layers;
  for (const LayerWeights& l : model_.weights.layers)
    layers.push_back({l.column_bundle, l.gate_up_columns_offset, l.down_columns_offset,
                      l.gate_up_column_scales, l.down_column_scales});
  ColumnStoreOptions o;
  o.share = options_.column_share;
  o.window = options_.flash.window;
  o.io_threads = options_.io_threads;
  o.storage = options_.flash.storage;
  return std::make_unique<FlashColumnStore>(std::move(layers), bundle_source(), o);
}

std::unique_ptr<FlashFfnStore> Session::make_flash_store() {
  const ModelWeights& mw = model_.weights;
  BundleSource* source = &bundle_source();
  FlashStoreOptions fo;
  fo.slots = options_.cache_slots;
  if (fo.slots.empty()) {
    const int64_t slots = options_.cache_neurons > 0
                              ? std::min(options_.cache_neurons, c_.ffn_neurons())
                              : c_.ffn_neurons();
    fo.slots.assign(static_cast<size_t>(c_.n_layer), slots);
  }
  fo.window = options_.flash.window;
  fo.io_threads = options_.io_threads;
  fo.storage = options_.flash.storage;
  // Split reads only where a non-positive deciding row means a zero output (ReLU family).
  fo.split_reads = options_.flash.split_reads && ffn_is_relu_family(c_.ffn);
  fo.pinned = options_.pinned;
  std::vector<uint64_t> offsets;
  for (const LayerWeights& l : mw.layers) offsets.push_back(l.bundles_offset);
  return std::make_unique<FlashFfnStore>(mw.bundle, c_.n_embd, std::move(offsets), *source,
                                         std::move(fo));
}

}  // namespace strata
