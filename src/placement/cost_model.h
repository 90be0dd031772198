// The cost model: what a plan costs per token on the machine a CostModel describes, evaluated
// neuron by neuron. Per layer: the dense blocks on their device; the FFN's GPU part and CPU
// part run at the same time, so the layer takes the longer of the two, plus a synchronisation
// (and the partial sum over the host link) when it uses both devices. A neuron costs its
// activation probability times its bytes over its tier's bandwidth; a flash neuron also its
// misses in the window cache: (1 - hit rate) of its uses, plus, when the cache's unpinned room
// is smaller than the window's working set, the uses of the neurons that do not fit.
#pragma once

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

// Expected distinct uses a neuron of probability p adds to a window of w tokens' working set.
double window_share(double p, int window);
// Per layer: the mean activation probability of the window's working set (sum p / sum of
// window shares over the layer's neurons): the uses that a missing slot costs.
double working_set_use(const LayerInventory& l, int window);

struct LayerCost {
  double attention_s = 0, gpu_ffn_s = 0, cpu_ffn_s = 0, sync_s = 0;
  double seconds() const;
};

// Per-layer costs and the whole prediction (held bytes included).
LayerCost layer_cost(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost,
                     int64_t layer, PlanPrediction* totals);
// The bytes each tier holds (ram_bytes, vram_bytes of `t`), without the per-token figures.
void held_bytes(const PlacementPlan& plan, const Inventory& inv, PlanPrediction& t);
PlanPrediction evaluate(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost);

// Fails with a one-line message when the plan holds more than a budget allows (the usable RAM
// is the budget less kRamReserve of it).
void check_budgets(const PlacementPlan& plan, const Inventory& inv);
// A thirty-second of the RAM budget stays unplanned: the page tables and the page cache a memory
// cgroup charges to the process (~0.14 GB of file pages at 7B). Planned without it, a 6.3 GiB
// cgroup filled up and its reclaim slowed decode.
uint64_t usable_ram(uint64_t budget);

}  // namespace strata
