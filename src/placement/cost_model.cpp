#include "placement/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata {

double window_misses(double demand, double room, double h) {
  const double a = h / (kRoomForFullReuse - 1.0);
  return std::max((1.0 - h) * demand, demand - a * (std::max(0.0, room) - demand));
}

double LayerCost::seconds() const {
  return attention_s + std::max(gpu_ffn_s, cpu_ffn_s) + sync_s;
}

uint64_t usable_ram(uint64_t budget) {
  return budget - budget / 32;
}

double bandwidth(const CostModel& c, Device d) {
  return d == Device::Accelerator ? c.vram_bytes_per_s : c.ram_bytes_per_s;
}

double attention_bytes(const Inventory& inv, const LayerInventory& l) {
  // A token reads its own sequence's cache, on average half full.
  return static_cast<double>(l.dense_bytes) +
         0.5 * static_cast<double>(l.kv_bytes) / std::max(1, inv.kv_sequences);
}

double sync_seconds(const Inventory& inv, const CostModel& c) {
  return c.sync_s + link_bytes(inv) / c.link_bytes_per_s;
}

LayerCost layer_cost(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost,
                     int64_t l, PlanPrediction* t) {
  const LayerInventory& li = inv.layers[static_cast<size_t>(l)];
  const LayerPlan& lp = plan.layers[static_cast<size_t>(l)];
  const bool attention_gpu = lp.attention == Device::Accelerator;
  LayerCost c;
  const double dense = attention_bytes(inv, li);
  c.attention_s = dense / bandwidth(cost, lp.attention);
  (attention_gpu ? t->vram_bytes_per_token : t->ram_bytes_per_token) += dense;
  const double b = static_cast<double>(li.neuron_bytes);
  const double vb = static_cast<double>(li.device_neuron_bytes());
  double flash_demand = 0;  // uses per token of the neurons behind the window cache
  int64_t cpu_neurons = 0;
  for (int32_t i = 0; i < li.n_neurons; ++i) {
    // A dense FFN's neurons all run (a dense mixture's: its chosen experts').
    const double p = li.activation.empty() ? 1.0 : li.activation[static_cast<size_t>(i)];
    switch (plan.tier(l, i)) {
      case Tier::Vram:
        c.gpu_ffn_s += p * vb / cost.vram_bytes_per_s;
        t->vram_bytes_per_token += p * vb;
        break;
      case Tier::RamPinned:
      case Tier::Ram:
        c.cpu_ffn_s += p * b / cost.ram_bytes_per_s;
        t->ram_bytes_per_token += p * b;
        ++cpu_neurons;
        break;
      case Tier::Flash:
        c.cpu_ffn_s += p * b / cost.ram_bytes_per_s;  // computed from the cache in RAM
        t->ram_bytes_per_token += p * b;
        flash_demand += p;
        ++cpu_neurons;
        break;
    }
  }
  if (inv.bundled) {
    const double room =
        static_cast<double>(lp.cache_slots - static_cast<int64_t>(lp.pinned.size()));
    const double misses = window_misses(flash_demand, room, li.window_hit_rate);
    c.cpu_ffn_s += misses * cost.flash_neuron_s;
    t->flash_bytes_per_token += misses * b;
  }
  const bool uses_gpu = attention_gpu || !lp.vram.empty();
  if (uses_gpu && (cpu_neurons > 0 || !attention_gpu)) {
    c.sync_s = sync_seconds(inv, cost);
    t->link_bytes_per_token += link_bytes(inv);
  }
  return c;
}

// Bytes each tier holds under the plan.
void held_bytes(const PlacementPlan& plan, const Inventory& inv, PlanPrediction& t) {
  // The model's copy in RAM holds every dense block (a GPU gets copies), and the FFN unless it
  // is bundled; KV caches live with their layer's attention.
  uint64_t ram = inv.fixed_ram_bytes + inv.output_bytes + plan.column_cache_bytes, vram = 0;
  bool any_gpu = plan.output == Device::Accelerator;
  if (plan.output == Device::Accelerator) vram += inv.output_bytes;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const LayerInventory& li = inv.layers[l];
    const LayerPlan& lp = plan.layers[l];
    ram += li.dense_bytes;
    if (lp.attention == Device::Accelerator) {
      vram += li.dense_bytes + li.kv_bytes;
      any_gpu = true;
    } else {
      ram += li.kv_bytes;
    }
    vram += static_cast<uint64_t>(lp.vram.size()) * li.device_neuron_bytes();
    any_gpu = any_gpu || !lp.vram.empty();
    ram += inv.bundled ? static_cast<uint64_t>(lp.cache_slots) * li.neuron_bytes : li.ffn_ram_bytes;
  }
  if (any_gpu) vram += inv.workspace_bytes;
  t.ram_bytes = ram;
  t.vram_bytes = vram;
}

PlanPrediction evaluate(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost) {
  PlanPrediction t;
  for (size_t l = 0; l < inv.layers.size(); ++l)
    t.seconds_per_token += layer_cost(plan, inv, cost, static_cast<int64_t>(l), &t).seconds();
  t.seconds_per_token += static_cast<double>(inv.output_bytes) / bandwidth(cost, plan.output);
  (plan.output == Device::Accelerator ? t.vram_bytes_per_token : t.ram_bytes_per_token) +=
      static_cast<double>(inv.output_bytes);
  held_bytes(plan, inv, t);
  return t;
}

double seconds_at_ram_rate(const PlanPrediction& p, double assumed, double measured) {
  if (assumed <= 0 || measured <= 0) return p.seconds_per_token;
  return p.seconds_per_token + p.ram_bytes_per_token * (1.0 / measured - 1.0 / assumed);
}

void check_budgets(const PlacementPlan& plan, const Inventory& inv) {
  PlanPrediction t;
  held_bytes(plan, inv, t);
  if (plan.budgets.ram > 0 && t.ram_bytes > usable_ram(plan.budgets.ram))
    fail("the plan holds {} bytes in RAM, over the {} usable of --ram-budget {}", t.ram_bytes,
         usable_ram(plan.budgets.ram), plan.budgets.ram);
  if (t.vram_bytes > plan.budgets.vram)
    fail("the plan holds {} bytes in VRAM, over --vram-budget {}", t.vram_bytes, plan.budgets.vram);
}

}  // namespace strata
