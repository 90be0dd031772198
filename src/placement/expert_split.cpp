#include "placement/expert_split.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"
#include "placement/cost_model.h"

namespace strata {

namespace {

uint64_t vram_held(const PlacementPlan& p, const Inventory& inv) {
  PlanPrediction t;
  held_bytes(p, inv, t);
  return t.vram_bytes;
}

// An expert the plan may put on the GPU: its share, id and layer.
struct ExpertChoice {
  double share;
  int64_t expert, layer;
};

}  // namespace

PlacementPlan plan_expert_split(const Inventory& inv, const Budgets& budgets,
                                const CostModel& cost) {
  if (inv.expert_neurons <= 0) fail("an expert split needs a mixture of experts");
  PlacementPlan p;
  p.solver = "experts by share";
  p.status = "whole experts";
  p.budgets = budgets;
  p.costs = cost;
  p.output = Device::Accelerator;
  p.layers.resize(inv.layers.size());
  for (LayerPlan& lp : p.layers) lp.attention = Device::Accelerator;
  if (vram_held(p, inv) > budgets.vram) p.output = Device::Host;
  for (LayerPlan& lp : p.layers) {
    if (vram_held(p, inv) <= budgets.vram) break;
    lp.attention = Device::Host;
  }
  if (p.layers.empty() || p.layers.back().attention != Device::Accelerator)
    fail("not one layer's attention fits the {} VRAM budget with its KV cache and buffers",
         size_text(static_cast<double>(budgets.vram)));
  const int64_t ff = inv.expert_neurons;
  std::vector<ExpertChoice> choices;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    if (p.layers[l].attention != Device::Accelerator) continue;  // a CPU layer computes there whole
    const LayerInventory& li = inv.layers[l];
    for (int64_t e = 0; e < li.n_neurons / ff; ++e)
      choices.push_back({li.activation.at(static_cast<size_t>(e * ff)), e,
                         static_cast<int64_t>(l)});
  }
  std::sort(choices.begin(), choices.end(), [](const ExpertChoice& a, const ExpertChoice& b) {
    return std::tuple(-a.share, a.expert, a.layer) < std::tuple(-b.share, b.expert, b.layer);
  });
  for (const ExpertChoice& c : choices) {
    std::vector<int32_t>& vram = p.layers[static_cast<size_t>(c.layer)].vram;
    const size_t before = vram.size();
    for (int64_t i = 0; i < ff; ++i) vram.push_back(static_cast<int32_t>(c.expert * ff + i));
    if (vram_held(p, inv) > budgets.vram) vram.resize(before);  // another layer's may fit
  }
  for (LayerPlan& lp : p.layers) std::sort(lp.vram.begin(), lp.vram.end());
  p.predicted = evaluate(p, inv, cost);
  return p;
}

}  // namespace strata
