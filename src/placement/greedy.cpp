#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "placement/cost_model.h"
#include "placement/solver.h"

namespace strata {

std::vector<std::vector<int32_t>> hottest_first(const Inventory& inv) {
  std::vector<std::vector<int32_t>> order;
  for (const LayerInventory& l : inv.layers) {
    std::vector<int32_t> ids(static_cast<size_t>(l.n_neurons));
    std::iota(ids.begin(), ids.end(), 0);
    if (inv.sparse)
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        return l.activation[static_cast<size_t>(a)] > l.activation[static_cast<size_t>(b)];
      });
    order.push_back(std::move(ids));
  }
  return order;
}

namespace {

// RAM held before the FFN: fixed parts, dense blocks, output, every KV cache (on the host).
uint64_t ram_before_ffn(const Inventory& inv) {
  uint64_t ram = inv.fixed_ram_bytes + inv.output_bytes;
  for (const LayerInventory& l : inv.layers) ram += l.dense_bytes + l.kv_bytes;
  return ram;
}

uint64_t kv_total(const Inventory& inv) {
  uint64_t kv = 0;
  for (const LayerInventory& l : inv.layers) kv += l.kv_bytes;
  return kv;
}

// Bundled: the cache slots per layer that the RAM budget leaves (every neuron without one).
int64_t budget_slots(const Inventory& inv, const Budgets& b) {
  const LayerInventory& l0 = inv.layers.front();
  if (b.ram == 0) return l0.n_neurons;
  const uint64_t left = usable_ram(b.ram) - ram_before_ffn(inv);
  return std::min<int64_t>(
      l0.n_neurons,
      static_cast<int64_t>(left / (static_cast<uint64_t>(inv.layers.size()) * l0.neuron_bytes)));
}

// PowerInfer's order: dense blocks layer by layer while they fit, the output head, then the
// hottest neurons of all layers.
void place_vram_greedy(const Inventory& inv, const Budgets& b, const SolverOptions& o,
                       const std::vector<std::vector<int32_t>>& order, PlacementPlan& p) {
  if (b.vram <= inv.workspace_bytes) return;
  uint64_t left = b.vram - inv.workspace_bytes;
  for (size_t l = 0; l < inv.layers.size() && o.dense_on_gpu; ++l) {
    const uint64_t need = inv.layers[l].dense_bytes + inv.layers[l].kv_bytes;
    if (need > left) break;
    p.layers[l].attention = Device::Accelerator;
    left -= need;
  }
  if (o.dense_on_gpu && inv.output_bytes <= left) {
    p.output = Device::Accelerator;
    left -= inv.output_bytes;
  }
  struct Candidate {
    double p;
    int32_t layer, rank;
  };
  std::vector<Candidate> all;
  for (size_t l = 0; l < inv.layers.size(); ++l)
    for (int32_t k = 0; k < inv.layers[l].n_neurons; ++k)
      all.push_back(
          {inv.layers[l].activation[static_cast<size_t>(order[l][static_cast<size_t>(k)])],
           static_cast<int32_t>(l), k});
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& c) { return a.p > c.p; });
  for (const Candidate& c : all) {
    if (o.neurons_with_attention &&
        p.layers[static_cast<size_t>(c.layer)].attention != Device::Accelerator)
      continue;
    const uint64_t bytes = inv.layers[static_cast<size_t>(c.layer)].device_neuron_bytes();
    if (bytes > left) break;
    p.layers[static_cast<size_t>(c.layer)].vram.push_back(
        order[static_cast<size_t>(c.layer)][static_cast<size_t>(c.rank)]);
    left -= bytes;
  }
}

}  // namespace

uint64_t minimum_ram(const Inventory& inv) {
  uint64_t need = ram_before_ffn(inv);
  for (const LayerInventory& l : inv.layers)
    need +=
        inv.bundled ? static_cast<uint64_t>(inv.min_cache_slots) * l.neuron_bytes : l.ffn_ram_bytes;
  return need;
}

void check_minimum(const Inventory& inv, const Budgets& b) {
  if (inv.layers.empty()) fail("the model has no layers to place");
  if (b.ram == 0) return;
  const uint64_t before = ram_before_ffn(inv);
  const uint64_t kv = kv_total(inv);
  const uint64_t need = minimum_ram(inv);
  const uint64_t ffn = need - before;
  if (need <= usable_ram(b.ram)) return;
  const uint64_t buffers = inv.host_workspace_bytes + inv.host_scratch_bytes;
  if (inv.column_bundled)
    fail(
        "the model without its FFN needs {} in RAM (weights {}, KV cache {}, buffers {}), over "
        "--ram-budget {}, with nothing left for the flash tier's column caches",
        size_text(need), size_text(need - kv - buffers), size_text(kv), size_text(buffers),
        size_text(b.ram));
  if (!inv.bundled)
    fail(
        "the model needs {} in RAM (weights {}, KV cache {}, buffers {}), over --ram-budget {}; "
        "{}",
        size_text(need), size_text(need - kv - buffers), size_text(kv), size_text(buffers),
        size_text(b.ram),
        inv.flash_route.empty() ? "`strata bundle` it to keep the FFN on flash" : inv.flash_route);
  fail(
      "--ram-budget {} is below the minimum {} (attention, output, norms and predictors {}, KV "
      "cache {}, buffers {}, {} neurons per layer {}, and 1/32 of the budget kept free)",
      size_text(b.ram), size_text(need + (need + 30) / 31), size_text(before - kv - buffers),
      size_text(kv), size_text(buffers), inv.min_cache_slots, size_text(ffn));
}

PlacementPlan plan_greedy(const Inventory& inv, const Budgets& b, const CostModel& cost,
                          const SolverOptions& o) {
  check_minimum(inv, b);
  PlacementPlan p;
  p.solver = "greedy";
  p.budgets = b;
  p.costs = cost;
  p.bundled = inv.bundled;
  p.layers.resize(inv.layers.size());
  const auto order = hottest_first(inv);
  place_vram_greedy(inv, b, o, order, p);
  if (inv.bundled) {
    const int64_t slots = budget_slots(inv, b);
    const int64_t pin = std::min<int64_t>(slots - 1, static_cast<int64_t>(o.pin_share * slots));
    for (size_t l = 0; l < inv.layers.size(); ++l) {
      LayerPlan& lp = p.layers[l];
      lp.cache_slots = slots;
      std::sort(lp.vram.begin(), lp.vram.end());
      // The hottest neurons that fired at all and are not in VRAM.
      for (int32_t id : order[l]) {
        if (static_cast<int64_t>(lp.pinned.size()) >= pin) break;
        if (inv.layers[l].activation[static_cast<size_t>(id)] <= 0) break;
        if (!std::binary_search(lp.vram.begin(), lp.vram.end(), id)) lp.pinned.push_back(id);
      }
      std::sort(lp.pinned.begin(), lp.pinned.end());
    }
  }
  for (LayerPlan& lp : p.layers) std::sort(lp.vram.begin(), lp.vram.end());
  p.predicted = evaluate(p, inv, cost);
  check_budgets(p, inv);
  return p;
}

PlacementPlan plan_whole_gpu(const Inventory& inv, const Budgets& budgets, const CostModel& cost) {
  PlacementPlan p;
  p.solver = "whole model on the GPU";
  p.status = "full offload";
  p.budgets = budgets;
  p.costs = cost;
  p.bundled = inv.bundled;
  p.output = Device::Accelerator;
  for (const LayerInventory& li : inv.layers) {
    LayerPlan lp;
    lp.attention = Device::Accelerator;
    lp.vram.resize(static_cast<size_t>(li.n_neurons));
    for (int32_t i = 0; i < li.n_neurons; ++i) lp.vram[static_cast<size_t>(i)] = i;
    p.layers.push_back(std::move(lp));
  }
  return p;
}

}  // namespace strata
