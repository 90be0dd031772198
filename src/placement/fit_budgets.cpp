#include "placement/fit_budgets.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "placement/cost_model.h"

namespace strata {

namespace {

// Activation probability of a layer's neuron (1 in a dense FFN).
double activation(const Inventory& inv, size_t l, int32_t id) {
  return inv.sparse ? inv.layers[l].activation[static_cast<size_t>(id)] : 1.0;
}

}  // namespace

void fit_within_budgets(PlacementPlan& p, const Inventory& inv) {
  auto held = [&] {
    PlanPrediction t;
    held_bytes(p, inv, t);
    return t;
  };
  if (held().vram_bytes > p.budgets.vram) p.output = Device::Host;
  for (size_t l = p.layers.size(); l-- > 0 && held().vram_bytes > p.budgets.vram;)
    p.layers[l].attention = Device::Host;
  uint64_t vram = held().vram_bytes;
  if (vram > p.budgets.vram) {
    struct Placed {
      double p;
      size_t layer;
      int32_t id;
    };
    std::vector<Placed> all;
    for (size_t l = 0; l < p.layers.size(); ++l)
      for (int32_t id : p.layers[l].vram) all.push_back({activation(inv, l, id), l, id});
    std::sort(all.begin(), all.end(), [](const Placed& x, const Placed& y) { return x.p < y.p; });
    std::vector<std::vector<int32_t>> drop(p.layers.size());
    for (size_t k = 0; k < all.size() && vram > p.budgets.vram; ++k) {
      drop[all[k].layer].push_back(all[k].id);
      vram -= inv.layers[all[k].layer].device_neuron_bytes();
    }
    for (size_t l = 0; l < p.layers.size(); ++l) {
      std::sort(drop[l].begin(), drop[l].end());
      std::vector<int32_t> keep;
      std::set_difference(p.layers[l].vram.begin(), p.layers[l].vram.end(), drop[l].begin(),
                          drop[l].end(), std::back_inserter(keep));
      p.layers[l].vram = std::move(keep);
    }
  }
  if (p.budgets.ram == 0 || !inv.bundled) return;
  const uint64_t usable = usable_ram(p.budgets.ram);
  auto minimum_slots = [&](const LayerPlan& lp) {
    return std::max<int64_t>(static_cast<int64_t>(lp.pinned.size()) + 1, inv.min_cache_slots);
  };
  for (size_t l = 0; l < p.layers.size() && held().ram_bytes > usable; ++l)
    p.layers[l].cache_slots = minimum_slots(p.layers[l]);
  // Then the coldest pinned neurons, a layer at a time (each frees a slot).
  uint64_t ram = held().ram_bytes;
  for (size_t l = 0; ram > usable && l < p.layers.size(); ++l) {
    LayerPlan& lp = p.layers[l];
    std::vector<int32_t> by_heat = lp.pinned;
    std::sort(by_heat.begin(), by_heat.end(),
              [&](int32_t x, int32_t y) { return activation(inv, l, x) > activation(inv, l, y); });
    while (ram > usable && !by_heat.empty() && lp.cache_slots > inv.min_cache_slots) {
      by_heat.pop_back();
      --lp.cache_slots;
      ram -= inv.layers[l].neuron_bytes;
    }
    std::sort(by_heat.begin(), by_heat.end());
    lp.pinned = std::move(by_heat);
  }
}

}  // namespace strata
