// Plans for the flash tier from what a run selects (issue 30): a profile records each token's
// selected neurons, the plan replays the flash caches over them (the same cache code, no data)
// and reads exactly what a run of that token stream reads; the default solver's plan never
// reads more than even caches without pins; selections in profile files are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "offline/bundle.h"
#include "offline/profile.h"
#include "planning/plan_replay.h"
#include "planning/planned_session.h"
#include "test_helpers.h"

namespace strata {
namespace {

const std::vector<int32_t> kTokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33, 12, 77, 201};

struct Models {
  std::unique_ptr<Model> ram, flash;
};

Models models() {
  const std::string path =
      strata::testing::sparse_tiny_model(DType::Q4_0, FfnActivation::ReGLU, 11);
  return {Model::load(path, false), Model::load(strata::testing::bundled_model(path), false)};
}

// The predictor's selections of kTokens decoded one at a time, as a profile of predict mode.
ActivationCounts decode_selections(const Model& m) {
  const int64_t neurons = m.config.ffn_neurons();
  const auto row = static_cast<size_t>((neurons + 7) / 8);
  ActivationCounts a;
  a.mode = FfnMode::Predict;
  a.tokens = a.selected_tokens = kTokens.size();
  a.counts.assign(static_cast<size_t>(m.config.n_layer),
                  std::vector<uint32_t>(static_cast<size_t>(neurons), 0));
  a.selections.assign(static_cast<size_t>(m.config.n_layer), {});
  ThreadPool pool(2);
  Session s(m, 64, pool, {FfnMode::Predict});
  s.set_selection_observer([&](int64_t l, int64_t n, int64_t, const uint8_t* selected) {
    ASSERT_EQ(n, 1);
    std::vector<uint8_t>& bits = a.selections[static_cast<size_t>(l)];
    bits.resize(bits.size() + row, 0);
    uint8_t* r = bits.data() + bits.size() - row;
    for (int64_t i = 0; i < neurons; ++i)
      if (selected[i] != 0) {
        r[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
        ++a.counts[static_cast<size_t>(l)][static_cast<size_t>(i)];
      }
  });
  for (int32_t t : kTokens) s.eval(t);
  return a;
}

// Bytes a bundled run of kTokens reads under `plan` (no look-ahead: the replay models none).
uint64_t run_bytes(const Model& flash, const PlacementPlan& plan, int window) {
  ThreadPool pool(2);
  SessionOptions o{FfnMode::Predict};
  o.flash.window = window;
  for (const LayerPlan& lp : plan.layers) {
    o.cache_slots.push_back(lp.cache_slots);
    o.pinned.push_back(lp.pinned);
  }
  Session s(flash, 64, pool, o);
  for (int32_t t : kTokens) s.eval(t);
  return s.flash_stats().bytes_read;
}

// Each layer `slots` slots, its `pins` most selected neurons pinned.
PlacementPlan caches(const ActivationCounts& a, int64_t slots, size_t pins) {
  PlacementPlan plan;
  for (const std::vector<uint32_t>& counts : a.counts) {
    LayerPlan lp;
    lp.cache_slots = slots;
    std::vector<int32_t> order(counts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return counts[x] > counts[y]; });
    lp.pinned.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(pins));
    std::sort(lp.pinned.begin(), lp.pinned.end());
    plan.layers.push_back(lp);
  }
  return plan;
}

TEST(PlanReplay, ReplayedBytesAreWhatTheRunReads) {
  const Models m = models();
  const ActivationCounts a = decode_selections(*m.ram);
  // Caches that hold a token's neurons with room to spare, that evict every token, and that
  // serve a token in passes; with and without pins; two windows.
  for (int64_t slots : {int64_t{200}, int64_t{110}, int64_t{40}})
    for (size_t pins : {size_t{0}, size_t{16}})
      for (int window : {2, 5}) {
        const PlacementPlan plan = caches(a, slots, pins);
        const double replayed = replayed_flash_bytes(*m.flash, plan, a, window, nullptr);
        const uint64_t read = run_bytes(*m.flash, plan, window);
        EXPECT_GT(read, 0u);
        EXPECT_DOUBLE_EQ(replayed * static_cast<double>(kTokens.size()), static_cast<double>(read))
            << "slots " << slots << " pins " << pins << " window " << window;
      }
  // Without selections, or for a model in RAM, there is nothing to replay.
  ActivationCounts none = a;
  none.selections.clear();
  none.selected_tokens = 0;
  EXPECT_THROW(replayed_flash_bytes(*m.flash, caches(a, 110, 0), none, 5, nullptr), Error);
  EXPECT_THROW(replayed_flash_bytes(*m.ram, caches(a, 110, 0), a, 5, nullptr), Error);
}

TEST(PlanReplay, TheDefaultPlanNeverReadsMoreThanEvenCachesWithoutPins) {
  const Models m = models();
  const ActivationCounts a = decode_selections(*m.ram);
  const Inventory inv =
      take_inventory(*m.flash, {64, FfnMode::Predict, {DType::F32, DType::F32}, &a});
  uint64_t base = inv.fixed_ram_bytes + inv.output_bytes;
  for (const auto& l : inv.layers) base += l.dense_bytes + l.kv_bytes;
  const uint64_t ffn = inv.layers.size() * inv.layers[0].neuron_bytes;
  for (int64_t room : {int64_t{90}, int64_t{130}, int64_t{180}}) {
    RunRequest r;
    r.mode = FfnMode::Predict;
    r.n_ctx = 64;
    r.flash.lookahead = false;  // the replay's rule without look-ahead's margin
    r.budgets.ram = (base + ffn * static_cast<uint64_t>(room)) * 32 / 31 + 1;
    RunRequest even = r;
    even.solver = SolverChoice::Greedy;  // no profile: even caches, nothing pinned
    const PlannedRun plain = plan_run(*m.flash, even);
    r.profile = &a;
    const PlannedRun chosen = plan_run(*m.flash, r);
    const uint64_t chosen_bytes = run_bytes(*m.flash, chosen.plan, 5);
    const uint64_t plain_bytes = run_bytes(*m.flash, plain.plan, 5);
    EXPECT_LE(chosen_bytes, plain_bytes) << "room " << room;
    // The plan's flash bytes are its replay's, which the run of the profiled tokens reads.
    EXPECT_DOUBLE_EQ(
        chosen.plan.predicted.flash_bytes_per_token * static_cast<double>(kTokens.size()),
        static_cast<double>(chosen_bytes))
        << "room " << room;
  }
}

TEST(PlanReplay, AProfileRecordsEachTokensSelectionsAndChecksThem) {
  const Models m = models();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = strata::testing::random_tokens(*m.ram, 40, 3);
  NeuronProfile p = profile_model(*m.ram, tokens, 32, 40, pool, {}, FfnMode::Predict);
  ASSERT_EQ(p.selected_tokens, p.tokens);
  const size_t n = p.counts[0].size(), row = (n + 7) / 8;
  for (size_t l = 0; l < p.counts.size(); ++l) {
    ASSERT_EQ(p.selections[l].size(), row * p.selected_tokens);
    // Every count is the number of tokens whose row has the neuron's bit.
    for (size_t i = 0; i < n; ++i) {
      uint32_t set = 0;
      for (uint64_t t = 0; t < p.selected_tokens; ++t)
        set += (p.selections[l][t * row + i / 8] >> (i % 8)) & 1;
      ASSERT_EQ(set, p.counts[l][i]) << "layer " << l << " neuron " << i;
    }
  }
  const std::string path = strata::testing::temp_file("replay.profile.gguf");
  write_profile(p, path);
  const NeuronProfile back = read_profile(path);
  EXPECT_EQ(back.selected_tokens, p.selected_tokens);
  EXPECT_EQ(back.selections, p.selections);
  // A layer's selections of the wrong size, and a bit past the layer's neurons, are refused.
  NeuronProfile bad = p;
  bad.selections[1].pop_back();
  write_profile(bad, path);
  EXPECT_THROW(read_profile(path), Error);
  NeuronProfile odd;
  odd.model_hash = p.model_hash;
  odd.tokens = odd.selected_tokens = 1;
  odd.counts = {std::vector<uint32_t>(10, 0)};
  odd.selections = {{0, 0x04}};  // neuron 10 of 10
  write_profile(odd, path);
  try {
    read_profile(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past the layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
