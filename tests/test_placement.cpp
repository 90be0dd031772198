// The placement solvers as pure functions: the ILP's optimum against brute force on small
// instances (every assignment of every neuron to every tier, every cache room, every device
// for the dense blocks), never worse than the greedy rule, PowerInfer's ILP as a special case,
// budgets as hard limits, and plans saved and read back.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "placement/cost_model.h"
#include "placement/plan.h"
#include "placement/solver.h"
#include "test_helpers.h"

namespace strata {
namespace {

// Layers of n neurons with power-law activation probabilities in a random order.
Inventory make_inventory(int layers, int n, bool bundled, uint32_t seed,
                         uint64_t neuron_bytes = 1 << 16) {
  std::mt19937 rng(seed);
  Inventory inv;
  inv.bundled = bundled;
  inv.sparse = true;
  inv.embd_bytes = 4096 * 4;
  inv.min_cache_slots = std::max(1, n / 4);
  inv.output_bytes = 3 << 20;
  inv.workspace_bytes = 1 << 20;
  inv.fixed_ram_bytes = inv.workspace_bytes + (2 << 20);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int l = 0; l < layers; ++l) {
    LayerInventory li;
    li.dense_bytes = (4 + l) << 20;
    li.kv_bytes = 1 << 20;
    li.neuron_bytes = neuron_bytes;
    li.n_neurons = n;
    li.ffn_ram_bytes = static_cast<uint64_t>(n) * neuron_bytes;
    for (int i = 0; i < n; ++i)
      li.activation.push_back(std::min(1.0, 0.6 / std::pow(i + 1.0, 0.8 + u(rng))));
    std::shuffle(li.activation.begin(), li.activation.end(), rng);
    li.window_hit_rate = 0.3 + 0.5 * u(rng);
    inv.layers.push_back(std::move(li));
  }
  return inv;
}


CostModel costs() {
  CostModel c;
  c.ram_bytes_per_s = 40e9;
  c.vram_bytes_per_s = 900e9;
  c.link_bytes_per_s = 25e9;
  c.flash_neuron_s = 40e-6;
  c.sync_s = 30e-6;
  return c;
}

bool fits(const PlacementPlan& p, const Inventory& inv) {
  try {
    check_budgets(p, inv);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The cheapest feasible plan by enumeration: per neuron a tier, per layer a cache size and the
// dense blocks' device, and the output head's device.
double brute_force(const Inventory& inv, const Budgets& b, const CostModel& c, bool gpu) {
  PlacementPlan p;
  p.bundled = inv.bundled;
  p.budgets = b;
  p.layers.resize(inv.layers.size());
  std::vector<Tier> tiers;
  if (gpu) tiers.push_back(Tier::Vram);
  tiers.push_back(inv.bundled ? Tier::RamPinned : Tier::Ram);
  if (inv.bundled) tiers.push_back(Tier::Flash);
  const int L = static_cast<int>(inv.layers.size()), n = static_cast<int>(inv.layers[0].n_neurons);
  const int neurons = L * n;
  double best = INFINITY;
  std::vector<int> choice(static_cast<size_t>(neurons), 0);
  const int devices = gpu ? 2 : 1;
  std::function<void(int)> rooms;  // per layer the cache's room, then evaluate
  auto assign = [&] {
    for (int l = 0; l < L; ++l) {
      p.layers[l].vram.clear();
      p.layers[l].pinned.clear();
      for (int i = 0; i < n; ++i) {
        const Tier t = tiers[static_cast<size_t>(choice[static_cast<size_t>(l * n + i)])];
        if (t == Tier::Vram) p.layers[l].vram.push_back(i);
        if (t == Tier::RamPinned) p.layers[l].pinned.push_back(i);
      }
    }
  };
  std::function<void(int)> room_of = [&](int l) {
    if (l == L) {
      for (int d = 0; d < (1 << (L + 1)) && (d == 0 || devices == 2); ++d) {
        for (int k = 0; k < L; ++k)
          p.layers[k].attention = (d >> k) & 1 ? Device::Accelerator : Device::Host;
        p.output = (d >> L) & 1 ? Device::Accelerator : Device::Host;
        if (!fits(p, inv)) continue;
        best = std::min(best, evaluate(p, inv, c).seconds_per_token);
      }
      return;
    }
    if (!inv.bundled) return room_of(l + 1);
    const int pinned = static_cast<int>(p.layers[l].pinned.size());
    for (int room = 1; pinned + room <= n; ++room) {
      if (pinned + room < inv.min_cache_slots) continue;
      p.layers[l].cache_slots = pinned + room;
      room_of(l + 1);
    }
  };
  const int per = static_cast<int>(tiers.size());
  for (;;) {
    assign();
    room_of(0);
    int k = 0;
    while (k < neurons && ++choice[static_cast<size_t>(k)] == per)
      choice[static_cast<size_t>(k++)] = 0;
    if (k == neurons) break;
  }
  return best;
}

// The ILP's plan costs what the cheapest plan of all costs, and fits.
void expect_optimal(const Inventory& inv, const Budgets& b, bool gpu, uint32_t seed) {
  const PlacementPlan p = plan_ilp(inv, b, costs());
  const double best = brute_force(inv, b, costs(), gpu);
  EXPECT_NEAR(p.predicted.seconds_per_token, best, best * 1e-9) << "seed " << seed;
  EXPECT_TRUE(fits(p, inv)) << "seed " << seed;
}

// Server slots: the cache of every slot is held, but a token's attention reads its own.
TEST(Placement, ATokenReadsOneSequencesKvCache) {
  Inventory inv;
  LayerInventory l;
  l.dense_bytes = 1000;
  l.kv_bytes = 8000;
  EXPECT_DOUBLE_EQ(attention_bytes(inv, l), 1000 + 4000);
  inv.kv_sequences = 4;
  EXPECT_DOUBLE_EQ(attention_bytes(inv, l), 1000 + 1000);
}

TEST(Placement, IlpFindsTheBruteForceOptimumOfSmallBundledInstances) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Inventory inv = make_inventory(2, 4, true, seed);
    // Room for the dense parts and a few neurons more than the minimum caches.
    const uint64_t base = testing::ram_before_ffn(inv);
    const uint64_t ram = base + (3 + seed % 4) * inv.layers[0].neuron_bytes;
    const Budgets b{ram + ram / 31 + 1, 0};
    expect_optimal(inv, b, false, seed);
  }
}

TEST(Placement, IlpFindsTheBruteForceOptimumWithThreeTiersAndTheDenseBlocksDevice) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Inventory inv = make_inventory(2, 3, true, seed);
    const uint64_t base = testing::ram_before_ffn(inv);
    const uint64_t ram = base + 5 * inv.layers[0].neuron_bytes;
    // VRAM for the buffers, one layer's dense blocks and a couple of neurons.
    const uint64_t vram = inv.workspace_bytes + inv.layers[0].dense_bytes + inv.layers[0].kv_bytes +
                          (1 + seed) * inv.layers[0].neuron_bytes;
    const Budgets b{ram + ram / 31 + 1, vram};
    expect_optimal(inv, b, true, seed);
  }
}

TEST(Placement, IlpFindsTheBruteForceOptimumOfAModelInRamWithAGpu) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const Inventory inv = make_inventory(2, 5, false, seed);
    const uint64_t vram = inv.workspace_bytes + (2 + seed) * inv.layers[0].neuron_bytes +
                          (seed % 2) * (inv.layers[1].dense_bytes + inv.layers[1].kv_bytes);
    const Budgets b{0, vram};
    expect_optimal(inv, b, true, seed);
  }
}

TEST(Placement, IlpIsNeverWorseThanTheGreedyRule) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const bool bundled = seed % 2 == 1;
    const Inventory inv = make_inventory(6, 700, bundled, seed, 1 << 14);
    const uint64_t base = testing::ram_before_ffn(inv);
    Budgets b;
    if (bundled) b.ram = (base + (200 + 60 * seed) * 6 * (1 << 14)) * 33 / 32;
    if (seed > 2) b.vram = inv.workspace_bytes + (seed * 3 + 2) * (1 << 20);
    SolverOptions o;
    o.pin_share = 0.1 * (seed % 5);
    const PlacementPlan greedy = plan_greedy(inv, b, costs(), o);
    const PlacementPlan ilp = plan_ilp(inv, b, costs(), o);
    EXPECT_LE(ilp.predicted.seconds_per_token, greedy.predicted.seconds_per_token * (1 + 1e-9))
        << "seed " << seed;
    EXPECT_TRUE(fits(ilp, inv)) << "seed " << seed;
  }
}

// PowerInfer's setting: GPU compute and the host link free, no synchronisation cost.
CostModel free_gpu_costs() {
  CostModel c = costs();
  c.vram_bytes_per_s = 1e30;
  c.link_bytes_per_s = 1e30;
  c.sync_s = 0;
  return c;
}

// PowerInfer's shipped ILP: maximise the activation mass in VRAM under a capacity. With free
// GPU compute and link, no synchronisation cost and the dense blocks kept on the host, the cost
// model's optimum is the globally hottest neurons that fit (a sort).
// strata's runs compute a layer whose dense blocks stay on the CPU wholly there: with
// neurons_with_attention no solver puts such a layer's neurons in VRAM, and under a budget
// that holds some layers' blocks the VRAM neurons all sit in those layers.
TEST(Placement, APredictionMovesToTheMeasuredRamRateExactly) {
  Inventory inv = make_inventory(3, 50, false, 5);
  PlacementPlan p;
  p.layers.resize(3);
  CostModel slow = costs();
  slow.ram_bytes_per_s = 25e9;
  const PlanPrediction planned = evaluate(p, inv, costs());
  EXPECT_NEAR(seconds_at_ram_rate(planned, costs().ram_bytes_per_s, 25e9),
              evaluate(p, inv, slow).seconds_per_token, 1e-12);
  EXPECT_EQ(seconds_at_ram_rate(planned, costs().ram_bytes_per_s, 0), planned.seconds_per_token);
}

TEST(Placement, TheSummaryStatesTheSpeedOnlyWhereAsked) {
  Inventory inv = make_inventory(3, 50, false, 5);
  PlacementPlan p;
  p.layers.resize(3);
  p.predicted = evaluate(p, inv, costs());
  const std::string with = plan_summary(p, inv);
  EXPECT_NE(with.find(fmt::format("predicted {:.1f} tok/s", p.predicted.tokens_per_s())),
            std::string::npos) << with;
  const std::string without = plan_summary(p, inv, PredictionShown::No);
  EXPECT_EQ(without.find("predicted"), std::string::npos) << without;
  EXPECT_EQ(without.find("3 layers"), with.find("3 layers"));
}

TEST(Placement, NeuronsGoToVramOnlyWithTheirLayersAttention) {
  for (bool bundled : {false, true}) {
    const Inventory inv = make_inventory(6, 200, bundled, 11, 1 << 14);
    SolverOptions o;
    o.neurons_with_attention = true;
    const uint64_t ram = bundled ? testing::ram_before_ffn(inv) + (40 << 20) : 0;
    // Room for the buffers, three layers' blocks (5, 6 and 7 MiB), the output head (3 MiB) and
    // 2 MiB of neurons.
    const uint64_t vram = inv.workspace_bytes + ((18 + 3 + 2) << 20);
    for (bool ilp : {false, true}) {
      const PlacementPlan p =
          ilp ? plan_ilp(inv, {ram, vram}, costs(), o) : plan_greedy(inv, {ram, vram}, costs(), o);
      size_t on_gpu = 0, neurons = 0;
      for (const LayerPlan& l : p.layers) {
        on_gpu += l.attention == Device::Accelerator;
        neurons += l.vram.size();
        if (l.attention != Device::Accelerator) {
          EXPECT_TRUE(l.vram.empty()) << (ilp ? "ilp" : "greedy") << (bundled ? " bundled" : "");
        }
      }
      EXPECT_GT(on_gpu, 0u) << (ilp ? "ilp" : "greedy");
      EXPECT_LT(on_gpu, inv.layers.size()) << "the budget holds some layers' blocks only";
      EXPECT_GT(neurons, 0u) << (ilp ? "ilp" : "greedy");
    }
  }
}

TEST(Placement, PowerInfersIlpIsTheCaseOfFreeGpuTime) {
  const Inventory inv = make_inventory(4, 300, false, 7, 1 << 14);
  const CostModel c = free_gpu_costs();
  SolverOptions o;
  o.dense_on_gpu = false;
  for (int capacity : {0, 17, 250, 900}) {
    const Budgets b{0, inv.workspace_bytes + static_cast<uint64_t>(capacity) * (1 << 14)};
    const PlacementPlan p = plan_ilp(inv, b, c, o);
    std::vector<double> all;
    for (const auto& l : inv.layers)
      all.insert(all.end(), l.activation.begin(), l.activation.end());
    std::sort(all.rbegin(), all.rend());
    double top = 0, placed = 0;
    for (int k = 0; k < capacity; ++k) top += all[static_cast<size_t>(k)];
    int64_t count = 0;
    for (size_t l = 0; l < inv.layers.size(); ++l)
      for (int32_t id : p.layers[l].vram)
        placed += inv.layers[l].activation[static_cast<size_t>(id)], ++count;
    EXPECT_EQ(count, capacity);
    EXPECT_NEAR(placed, top, 1e-9) << "capacity " << capacity;
    for (const auto& l : p.layers) EXPECT_EQ(l.attention, Device::Host);
  }
}

// PowerInfer's per-layer minimum T: a layer on the GPU at all gets at least T neurons.
TEST(Placement, PerLayerMinimumOfVramNeuronsHolds) {
  const Inventory inv = make_inventory(4, 100, false, 3, 1 << 14);
  const CostModel c = free_gpu_costs();
  SolverOptions o;
  o.dense_on_gpu = false;
  o.min_vram_neurons = 40;
  const PlacementPlan p = plan_ilp(inv, Budgets{0, inv.workspace_bytes + 90ull * (1 << 14)}, c, o);
  int64_t total = 0;
  for (const auto& l : p.layers) {
    EXPECT_TRUE(l.vram.empty() || l.vram.size() >= 40) << l.vram.size();
    total += static_cast<int64_t>(l.vram.size());
  }
  EXPECT_GE(total, 80);  // two layers' minimum fit in 90 neurons, three do not
  EXPECT_LE(total, 90);
}

// Today's rule: the cache is what the budget leaves, pin_share of it pinned with the hottest
// neurons that fired.
TEST(Placement, GreedyRuleSizesTheCacheFromTheBudgetAndPinsTheHottest) {
  Inventory inv = make_inventory(3, 400, true, 5, 1 << 14);
  inv.layers[1].activation[17] = 0;  // never fired: never pinned
  const uint64_t base = testing::ram_before_ffn(inv);
  const uint64_t budget = (base + 3 * 250 * (1 << 14)) * 32 / 31 + 64;
  SolverOptions o;
  o.pin_share = 0.4;
  const PlacementPlan p = plan_greedy(inv, Budgets{budget, 0}, costs(), o);
  const int64_t slots = static_cast<int64_t>((usable_ram(budget) - base) / (3 * (1 << 14)));
  ASSERT_EQ(slots, 250);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(p.layers[l].cache_slots, slots);
    ASSERT_EQ(p.layers[l].pinned.size(), 100u);
    double coldest_pinned = 1, hottest_other = 0;
    for (int32_t i = 0; i < 400; ++i) {
      const double a = inv.layers[l].activation[static_cast<size_t>(i)];
      if (std::binary_search(p.layers[l].pinned.begin(), p.layers[l].pinned.end(), i))
        coldest_pinned = std::min(coldest_pinned, a);
      else
        hottest_other = std::max(hottest_other, a);
    }
    EXPECT_GE(coldest_pinned, hottest_other);
  }
  EXPECT_FALSE(std::binary_search(p.layers[1].pinned.begin(), p.layers[1].pinned.end(), 17));
}

TEST(Placement, BudgetsBelowTheMinimumAreClearErrors) {
  const Inventory bundled = make_inventory(2, 64, true, 1);
  try {
    plan_ilp(bundled, Budgets{1 << 20, 0}, costs());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("below the minimum"), std::string::npos) << e.what();
  }
  const Inventory ram = make_inventory(2, 64, false, 1);
  try {
    plan_greedy(ram, Budgets{1 << 20, 0}, costs());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("strata bundle"), std::string::npos) << e.what();
  }
}

TEST(Placement, PlansRoundTripThroughJsonAndBadOnesAreRefused) {
  const Inventory inv = make_inventory(3, 50, true, 2);
  const uint64_t base = testing::ram_before_ffn(inv);
  const Budgets b{(base + 3 * 30 * inv.layers[0].neuron_bytes) * 33 / 32, 0};
  const PlacementPlan p = plan_ilp(inv, b, costs());
  const PlacementPlan q = plan_from_json(plan_to_json(p), inv);
  ASSERT_EQ(q.layers.size(), p.layers.size());
  for (size_t l = 0; l < p.layers.size(); ++l) {
    EXPECT_EQ(q.layers[l].pinned, p.layers[l].pinned);
    EXPECT_EQ(q.layers[l].vram, p.layers[l].vram);
    EXPECT_EQ(q.layers[l].cache_slots, p.layers[l].cache_slots);
  }
  auto refused = [&](const std::function<void(nlohmann::json&)>& spoil, const char* needle) {
    nlohmann::json j = plan_to_json(p);
    spoil(j);
    try {
      plan_from_json(j, inv);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused([](nlohmann::json& j) { j["format"] = "other"; }, "not a strata plan");
  refused([](nlohmann::json& j) { j["layers"].erase(0); }, "layers, the model");
  refused([](nlohmann::json& j) { j["layers"][1]["pinned"] = {3, 99}; }, "outside");
  refused([](nlohmann::json& j) { j["layers"][1]["pinned"] = {5, 3}; }, "ascending");
  refused([](nlohmann::json& j) { j["layers"][0]["attention"] = "tpu"; }, "host");
  refused([](nlohmann::json& j) { j["layers"][2]["cache_slots"] = 0; }, "pins");
  refused([](nlohmann::json& j) { j["bundled"] = false; }, "bundled");
  // Issue 29: each of these was accepted silently or answered with nlohmann's own text.
  refused([](nlohmann::json& j) { j.erase("budgets"); }, "'budgets'");
  refused([](nlohmann::json& j) { j["budgets"]["ram"] = -5; }, "budgets.ram");
  refused([](nlohmann::json& j) { j["layers"][1]["pinned"] = {"a"}; }, "not a neuron id");
  refused([](nlohmann::json& j) { j["version"] = 2; }, "version 2");
  refused([](nlohmann::json& j) { j.erase("version"); }, "version");
  refused([](nlohmann::json& j) { j["layers"][0]["kv"] = 5; }, "layer 0's kv");
  refused([](nlohmann::json& j) { j["layers"][0]["kv"] = "cuda"; }, "where its attention");
  refused([](nlohmann::json& j) { j["layers"][2]["layer"] = 1; }, "in order");
  refused([](nlohmann::json& j) { j["layers"][1]["layer"] = 7; }, "in order");
  refused([](nlohmann::json& j) { j["output"] = nullptr; }, "'output'");
  refused([](nlohmann::json& j) { j["solver"] = 3; }, "'solver'");
}

// Issue 29: a NaN reaching GLPK aborted the process (SIGABRT inside the library); the
// inputs are range-checked where they are read, and the program refuses a non-finite number.
TEST(Placement, NonFiniteInputsAreAnErrorNotAnAbort) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    Inventory inv = make_inventory(2, 50, true, 2);
    inv.layers[1].window_hit_rate = bad;
    const Budgets b{(testing::ram_before_ffn(inv) + 2 * 30 * inv.layers[0].neuron_bytes), 0};
    try {
      plan_ilp(inv, b, costs());
      ADD_FAILURE() << "accepted a window hit rate of " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("placement:"), std::string::npos) << e.what();
    }
  }
}

TEST(Placement, CostModelCountsTiersAndTheSynchronisation) {
  Inventory inv = make_inventory(1, 4, false, 1);
  inv.layers[0].activation = {1.0, 0.5, 0.25, 0.0};
  PlacementPlan p;
  p.layers.resize(1);
  const CostModel c = costs();
  const double b = static_cast<double>(inv.layers[0].neuron_bytes);
  const double attention =
      (inv.layers[0].dense_bytes + 0.5 * inv.layers[0].kv_bytes) / c.ram_bytes_per_s;
  const double output = inv.output_bytes / c.ram_bytes_per_s;
  EXPECT_NEAR(evaluate(p, inv, c).seconds_per_token,
              attention + 1.75 * b / c.ram_bytes_per_s + output, 1e-15);
  // Neuron 0 on the GPU: the layer waits for the slower side and synchronises.
  p.layers[0].vram = {0};
  const double sync = c.sync_s + 2.0 * inv.embd_bytes / c.link_bytes_per_s;
  const PlanPrediction t = evaluate(p, inv, c);
  EXPECT_NEAR(
      t.seconds_per_token,
      attention + std::max(b / c.vram_bytes_per_s, 0.75 * b / c.ram_bytes_per_s) + sync + output,
      1e-15);
  EXPECT_NEAR(t.vram_bytes_per_token, b, 1e-9);
  EXPECT_EQ(t.vram_bytes, inv.workspace_bytes + inv.layers[0].neuron_bytes);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// A mixture's plan by expert: a layer's neuron ids counted by the expert they belong to (its
// experts' neurons in order), ids past the layer ignored.
TEST(PlanReport, NeuronsAreCountedByTheirExpert) {
  const std::vector<int32_t> ids{0, 1, 511, 512, 1500, 2047, 2048};
  EXPECT_EQ(neurons_per_expert(ids, 512, 2048), (std::vector<int64_t>{3, 1, 1, 1}));
  EXPECT_EQ(neurons_per_expert({}, 512, 2048), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_TRUE(neurons_per_expert(ids, 0, 2048).empty());  // no experts
}

}  // namespace
}  // namespace strata

#include "placement/expert_split.h"

namespace strata {
namespace {

// A dense mixture: `layers` layers of `experts` experts of 4 neurons, each neuron its expert's
// share of the tokens (shares[e], the same in every layer unless `per_layer`).
Inventory mixture_inventory(int layers, const std::vector<double>& shares,
                            std::vector<std::vector<double>> per_layer = {}) {
  Inventory inv;
  inv.sparse = false;
  inv.expert_neurons = 4;
  inv.embd_bytes = 1024;
  inv.output_bytes = 1 << 20;
  inv.workspace_bytes = 1 << 20;
  inv.fixed_ram_bytes = 2 << 20;
  for (int l = 0; l < layers; ++l) {
    LayerInventory li;
    li.dense_bytes = 1 << 20;
    li.kv_bytes = 1 << 20;
    const std::vector<double>& s = per_layer.empty() ? shares : per_layer[static_cast<size_t>(l)];
    li.neuron_bytes = 1 << 18;  // an expert: 1 MiB
    li.n_neurons = 4 * static_cast<int64_t>(s.size());
    li.ffn_ram_bytes = static_cast<uint64_t>(li.n_neurons) * li.neuron_bytes;
    for (const double share : s) li.activation.insert(li.activation.end(), 4, share);
    inv.layers.push_back(std::move(li));
  }
  return inv;
}

std::vector<int64_t> experts_in_vram(const PlacementPlan& p, size_t l, int64_t n_expert) {
  return neurons_per_expert(p.layers[l].vram, 4, 4 * n_expert);
}

// With even shares every layer gets its first expert before any layer gets a second; whole
// experts only; the budget holds; the dense blocks and the output head go first.
TEST(ExpertSplit, EvenSharesSpreadWholeExpertsOverTheLayersWithinTheBudget) {
  const Inventory inv = mixture_inventory(3, {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
  // Workspace 1 + output 1 + 3 x (dense 1 + KV 1) = 8 MiB, then 1 MiB an expert: 5 experts.
  const PlacementPlan p = plan_expert_split(inv, {0, 13u << 20}, costs());
  EXPECT_EQ(p.output, Device::Accelerator);
  for (const LayerPlan& lp : p.layers) EXPECT_EQ(lp.attention, Device::Accelerator);
  EXPECT_EQ(experts_in_vram(p, 0, 8), (std::vector<int64_t>{4, 4, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(experts_in_vram(p, 1, 8), (std::vector<int64_t>{4, 4, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(experts_in_vram(p, 2, 8), (std::vector<int64_t>{4, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_LE(p.predicted.vram_bytes, 13u << 20);
  EXPECT_EQ(p.predicted.vram_bytes, 13u << 20);  // the budget is used to the byte here
  // Everything fits: every expert on the GPU, nothing read from RAM for the FFN.
  const PlacementPlan all = plan_expert_split(inv, {0, 1u << 30}, costs());
  for (size_t l = 0; l < 3; ++l) EXPECT_EQ(all.layers[l].vram.size(), 32u);
}

// A profile's shares decide: the most chosen experts first, whatever their layer; a cost
// model's prediction improves with each expert placed.
TEST(ExpertSplit, TheMostChosenExpertsGoFirst) {
  const Inventory inv = mixture_inventory(
      2, {}, {{0.05, 0.6, 0.05, 0.3}, {0.5, 0.1, 0.3, 0.1}});
  const PlacementPlan p = plan_expert_split(inv, {0, 9u << 20}, costs());  // 3 experts
  EXPECT_EQ(experts_in_vram(p, 0, 4), (std::vector<int64_t>{0, 4, 0, 0}));   // 0.6
  EXPECT_EQ(experts_in_vram(p, 1, 4), (std::vector<int64_t>{4, 0, 4, 0}));   // 0.5, 0.3 (layer 1
  // ties layer 0's 0.3 on share and wins on the lower expert id, 2 < 3)
  const PlacementPlan fewer = plan_expert_split(inv, {0, 7u << 20}, costs());
  EXPECT_LT(p.predicted.seconds_per_token, fewer.predicted.seconds_per_token);
}

// Too small for every dense block: the first layers' attention goes to the CPU (with their
// experts), the output head first; too small for one layer: a one-line error.
TEST(ExpertSplit, ATightBudgetLeavesTheFirstLayersOnTheCpu) {
  const Inventory inv = mixture_inventory(3, {0.5, 0.5, 0.5, 0.5});
  const PlacementPlan p = plan_expert_split(inv, {0, 5u << 20}, costs());
  EXPECT_EQ(p.output, Device::Host);
  EXPECT_EQ(p.layers[0].attention, Device::Host);
  EXPECT_TRUE(p.layers[0].vram.empty());
  EXPECT_EQ(p.layers[2].attention, Device::Accelerator);
  EXPECT_LE(p.predicted.vram_bytes, 5u << 20);
  EXPECT_THROW(plan_expert_split(inv, {0, 2u << 20}, costs()), Error);
  Inventory dense = inv;
  dense.expert_neurons = 0;
  EXPECT_THROW(plan_expert_split(dense, {0, 1u << 30}, costs()), Error);
}

// A cut expert cannot run: the session's check names it.
TEST(ExpertSplit, WholeExpertsAreReadBackAndACutOneIsNamed) {
  std::vector<int32_t> ids{4, 5, 6, 7, 12, 13, 14, 15};
  EXPECT_EQ(whole_experts(ids, 4, 16, 0), (std::vector<uint8_t>{0, 1, 0, 1}));
  ids.pop_back();
  try {
    whole_experts(ids, 4, 16, 2);
    FAIL() << "a cut expert was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 of expert 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
