// The placement ILP at the sizes it must handle: a 13B shape (40 layers of 13824 neurons) with
// three tiers (VRAM, RAM, flash), power-law activation frequencies. Target: under 2 s.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "placement/solver.h"

namespace strata {
namespace {

Inventory inventory_13b(bool bundled) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Inventory inv;
  inv.bundled = bundled;
  inv.embd_bytes = 5120 * 4;
  inv.min_cache_slots = 13824 / 8;
  inv.output_bytes = 5120ull * 32000 * 9 / 16;  // Q4_0
  inv.workspace_bytes = 64ull << 20;
  inv.fixed_ram_bytes = inv.workspace_bytes + (16ull << 20);
  for (int l = 0; l < 40; ++l) {
    LayerInventory li;
    li.dense_bytes = 4ull * 5120 * 5120 * 9 / 16 + 2 * 5120 * 4 + 2 * 1024 * 5120 * 9 / 16;
    li.kv_bytes = 2ull * 4096 * 5120 * 2;
    li.neuron_bytes = 3ull * 5120 * 9 / 16;
    li.n_neurons = 13824;
    li.ffn_ram_bytes = li.neuron_bytes * 13824;
    for (int i = 0; i < 13824; ++i)
      li.activation.push_back(std::min(1.0, 0.8 / std::pow(1.0 + i * (0.5 + u(rng)), 0.7)));
    std::shuffle(li.activation.begin(), li.activation.end(), rng);
    li.window_hit_rate = 0.6;
    inv.layers.push_back(std::move(li));
  }
  return inv;
}

void BM_PlanIlp13bThreeTiers(benchmark::State& state) {
  const Inventory inv = inventory_13b(true);
  CostModel c;
  c.flash_neuron_s = 25e-6;
  const Budgets b{8ull << 30, static_cast<uint64_t>(state.range(0)) << 30};
  PlacementPlan p;
  for (auto _ : state) benchmark::DoNotOptimize(p = plan_ilp(inv, b, c));
  const PlacementPlan greedy = plan_greedy(inv, b, c);
  state.counters["ilp_tok_s"] = p.predicted.tokens_per_s();
  state.counters["greedy_tok_s"] = greedy.predicted.tokens_per_s();
  state.counters["gap_pct"] = 100 * (p.predicted.seconds_per_token / p.lower_bound_s - 1);
  state.SetLabel(p.status);
}
BENCHMARK(BM_PlanIlp13bThreeTiers)->Arg(0)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond);

void BM_PlanGreedy13bThreeTiers(benchmark::State& state) {
  const Inventory inv = inventory_13b(true);
  CostModel c;
  c.flash_neuron_s = 25e-6;
  const Budgets b{8ull << 30, 8ull << 30};
  for (auto _ : state) benchmark::DoNotOptimize(plan_greedy(inv, b, c));
}
BENCHMARK(BM_PlanGreedy13bThreeTiers)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata
