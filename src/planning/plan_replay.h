// The flash tier replayed over a profile's recorded token stream: what a bundled model's run
// under a placement plan would read from flash per token, decided by the same code a run uses
// (FlashFfnStore and its NeuronCaches, keeping their bookkeeping and no data: window, eviction
// by decayed use, pins, passes, read merging from the storage profile), over the neurons each
// profiled token selected, in order. The cost model's window-miss rule guesses a cache's
// reuse from one number per layer; the replay runs the cache.
#pragma once

#include <cstdint>

#include "model/model.h"
#include "placement/plan.h"
#include "planning/model_inventory.h"
#include "tiers/storage_profile.h"

namespace strata {

// Bytes read from flash per token (look-ahead and split reads aside) by the plan's caches over
// the profile's selections; the profile must have them (ActivationCounts::selected_tokens > 0)
// for every layer of a bundled model.
double replayed_flash_bytes(const Model& model, const PlacementPlan& plan,
                            const ActivationCounts& profile, int window,
                            const StorageProfile* storage);

}  // namespace strata
