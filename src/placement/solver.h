// The placement solvers: pure functions from an inventory, budgets and a cost model to a plan.
//   greedy: the rule strata used before plans (the flash tier's cache is what the RAM budget
//           leaves, a share of it pinned with the profile's hottest neurons) and, given VRAM,
//           PowerInfer's order: dense blocks layer by layer while they fit, then the globally
//           hottest neurons.
//   ilp:    an integer linear program (GLPK) minimising the cost model's time per token with
//           every budget a hard constraint (ilp.cpp has the formulation).
// Both fail with a one-line message when even the smallest plan does not fit.
#pragma once

#include <string>

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

struct SolverOptions {
  double pin_share = 0.5;    // greedy, bundled: share of each layer's cache pinned
  bool dense_on_gpu = true;  // dense blocks (attention, predictor, output) may go to VRAM
  // A layer's neurons go to VRAM only with its attention (strata's runs: a layer whose dense
  // blocks stay on the CPU computes wholly there). Off: PowerInfer's model, where any layer's
  // neurons may be on the GPU.
  bool neurons_with_attention = false;
  // ilp: if a layer has neurons in VRAM, at least this many (PowerInfer's per-layer minimum T)
  int64_t min_vram_neurons = 0;
  // ilp: the sorted neurons of a layer are cut into at most this many groups (each placed as
  // counts; the hottest neurons of a group first). Layers with fewer neurons: one per group.
  int groups_per_layer = 16;
  double time_limit_s = 1.5;  // the LP relaxation and branch and bound together
  double mip_gap = 1e-4;      // relative: branch and bound stops within this of the optimum
};

PlacementPlan plan_greedy(const Inventory& inv, const Budgets& budgets, const CostModel& cost,
                          const SolverOptions& options = {});
PlacementPlan plan_ilp(const Inventory& inv, const Budgets& budgets, const CostModel& cost,
                       const SolverOptions& options = {});

// The whole model on the GPU (full offload): every layer's dense blocks and neurons in VRAM,
// the output head too. The budgets are recorded, not checked (planning/device_choice.h decides
// whether the model fits).
PlacementPlan plan_whole_gpu(const Inventory& inv, const Budgets& budgets, const CostModel& cost);

// Per layer, neuron ids by activation probability, hottest first (ties: lower id first).
std::vector<std::vector<int32_t>> hottest_first(const Inventory& inv);

// The memory every plan needs before any neuron is placed: fails naming the parts when the
// RAM budget cannot hold them.
void check_minimum(const Inventory& inv, const Budgets& budgets);
// The RAM check_minimum asks for (before the 1/32 kept free): the model without its FFN and
// the FFN's smallest caches (a bundled model) or whole FFN.
uint64_t minimum_ram(const Inventory& inv);

}  // namespace strata
