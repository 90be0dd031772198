#include "planning/plan_replay.h"

#include "core/error.h"
#include "tiers/flash_ffn_store.h"

namespace strata {

namespace {

// Nothing is read in a replay (the caches keep no data); the queue depth is io_uring's, which
// read merging plans for.
class NoReads final : public BundleSource {
 public:
  void read(void*, uint64_t, uint64_t) override {
    fail("a replay of the flash tier reads nothing");
  }
  std::string describe() const override { return "a replay"; }
  int queue_depth() const override { return 64; }
};

// Takes every segment of the layer begun: handing one out is where the store looks up its
// neurons, counts the misses as reads and evicts (what the replay measures); the segments'
// rows themselves are not read.
void hand_out_segments(FfnStore& store, FfnSegment& segment) {
  while (store.next(segment)) continue;
}

}  // namespace

double replayed_flash_bytes(const Model& model, const PlacementPlan& plan,
                            const ActivationCounts& profile, int window,
                            const StorageProfile* storage) {
  const ModelConfig& c = model.config;
  const auto layers = static_cast<size_t>(c.n_layer);
  const int64_t neurons = c.ffn_neurons();
  const auto row = static_cast<size_t>((neurons + 7) / 8);
  const uint64_t tokens = profile.selected_tokens;
  if (!model.weights.bundled) fail("a replay of the flash tier needs a bundled model");
  if (tokens == 0 || profile.selections.size() != layers || plan.layers.size() != layers)
    fail("a replay of the flash tier needs each of the {} layers' recorded selections", layers);
  for (const std::vector<uint8_t>& bits : profile.selections)
    if (bits.size() < tokens * row)
      fail("the profile's selections hold {} bytes a layer, {} tokens of {} neurons need {}",
           bits.size(), tokens, neurons, tokens * row);
  FlashStoreOptions o;
  o.window = window;
  o.storage = storage;
  o.keeps_data = false;
  for (const LayerPlan& lp : plan.layers) {
    o.slots.push_back(lp.cache_slots);
    o.pinned.push_back(lp.pinned);
  }
  NoReads source;
  FlashFfnStore store(model.weights.bundle, c.n_embd, std::vector<uint64_t>(layers, 0), source,
                      std::move(o));
  std::vector<int32_t> ids;
  std::vector<uint8_t> need;
  FfnSegment segment;  // reused: its views are never read here
  for (uint64_t t = 0; t < tokens; ++t)
    for (size_t l = 0; l < layers; ++l) {
      const uint8_t* bits = profile.selections[l].data() + t * row;
      ids.clear();
      for (int64_t i = 0; i < neurons; ++i)
        if ((bits[i / 8] >> (i % 8)) & 1) ids.push_back(static_cast<int32_t>(i));
      need.assign(ids.size(), 1);
      NeuronList list{ids.data(), static_cast<int64_t>(ids.size()), need.data(),
                      static_cast<int64_t>(ids.size()), 1};
      store.begin(static_cast<int64_t>(l), list, static_cast<int64_t>(t));
      hand_out_segments(store, segment);
    }
  return static_cast<double>(store.stats().bytes_read) / static_cast<double>(tokens);
}

}  // namespace strata
