// Plans applied to runs: the inventory counts what sessions allocate, a bundled model run under
// an ILP plan (per-layer caches, pinned neurons) gives the logits of the model in RAM bit for
// bit, plans saved and read back run the same, and the transfer queue keeps order and errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "offline/bundle.h"
#include "offline/profile.h"
#include "placement/cost_model.h"
#include "placement/solver.h"
#include "runtime/kv_cache.h"
#include "planning/planned_session.h"
#include "runtime/workspace.h"
#include "test_helpers.h"
#include "tiers/transfer_queue.h"

namespace strata {
namespace {

const std::vector<int32_t> kPlannedTokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33};

std::vector<std::vector<float>> logits(const Model& m, const SessionOptions& o) {
  ThreadPool pool(2);
  Session s(m, 64, pool, o);
  std::vector<std::vector<float>> out;
  for (int32_t t : kPlannedTokens) {
    auto l = s.eval(t);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}


using strata::testing::profile_counts;

TEST(PlannedSession, InventoryCountsWhatTheSessionAllocates) {
  const std::string path = strata::testing::sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 4);
  const auto m = Model::load(path, false);
  for (FfnMode mode : {FfnMode::Dense, FfnMode::Predict}) {
    ThreadPool pool(2);
    CpuBackend backend(pool);
    SessionOptions o;
    o.ffn = mode;
    const uint64_t before = backend.allocated();
    {
      Session s(*m, 48, backend, o);
      const Inventory inv = take_inventory(*m, {48, mode, {DType::F32, DType::F32}, nullptr});
      uint64_t kv = 0;
      for (const auto& l : inv.layers) kv += l.kv_bytes;
      // The backend rounds each allocation up to whole pages.
      const uint64_t expected = kv + inv.host_workspace_bytes;
      EXPECT_GE(backend.allocated() - before, expected);
      EXPECT_LE(backend.allocated() - before, expected + 3 * 4096);
      EXPECT_EQ(kv, s.kv_cache_bytes());
    }
    EXPECT_EQ(backend.allocated(), before);  // all given back
  }
}

TEST(PlannedSession, BundledModelUnderAnIlpPlanGivesTheLogitsOfTheModelInRam) {
  const std::string path = strata::testing::sparse_tiny_model(DType::Q4_0, FfnActivation::ReGLU, 6);
  const std::string bundle = path + ".planned.bundle";
  write_bundled_model(*Model::load(path, false, LoadMode::Map), bundle);
  const auto ram = Model::load(path, false);
  const ActivationCounts counts = profile_counts(*ram);
  // The model in RAM prepared the same way (the CPU backend's layouts for whole products).
  RunRequest in_ram;
  in_ram.mode = FfnMode::Predict;
  in_ram.n_ctx = 64;
  const auto expected = logits(*ram, plan_run(*ram, in_ram).session);
  const auto flash = Model::load(bundle, false);
  RunRequest r;
  r.mode = FfnMode::Predict;
  r.n_ctx = 64;
  r.profile = &counts;
  // What the smallest caches need, and room for about half the neurons more.
  const Inventory inv =
      take_inventory(*flash, {64, FfnMode::Predict, {DType::F32, DType::F32}, &counts});
  const uint64_t base = testing::ram_before_ffn(inv);
  const uint64_t ffn = inv.layers.size() * inv.layers[0].neuron_bytes;
  r.budgets.ram = (base + ffn * 160) * 32 / 31 + 1;
  for (SolverChoice solver : {SolverChoice::Ilp, SolverChoice::Greedy}) {
    r.solver = solver;
    const PlannedRun run = plan_run(*flash, r);
    ASSERT_EQ(run.session.cache_slots.size(), inv.layers.size());
    int64_t pinned = 0;
    for (size_t l = 0; l < inv.layers.size(); ++l) {
      EXPECT_LE(run.session.cache_slots[l], 256);
      pinned += static_cast<int64_t>(run.session.pinned[l].size());
    }
    EXPECT_GT(pinned, 0) << "the profile's hot neurons are pinned";
    EXPECT_LE(run.plan.predicted.ram_bytes, usable_ram(r.budgets.ram));
    ThreadPool pool(2);
    Session s(*flash, 64, pool, run.session);
    for (size_t l = 0; l < inv.layers.size(); ++l) {
      EXPECT_EQ(s.neuron_caches()[l]->capacity(), run.session.cache_slots[l]);
      EXPECT_EQ(s.neuron_caches()[l]->pinned(), static_cast<int64_t>(run.session.pinned[l].size()));
    }
    EXPECT_EQ(logits(*flash, run.session), expected) << run.plan.solver;
  }
  // A saved plan runs the same.
  r.solver = SolverChoice::Ilp;
  const PlannedRun solved = plan_run(*flash, r);
  const nlohmann::json saved = plan_to_json(solved.plan);
  RunRequest from_file = r;
  from_file.plan = &saved;
  const PlannedRun loaded = plan_run(*flash, from_file);
  EXPECT_EQ(loaded.session.pinned, solved.session.pinned);
  EXPECT_EQ(loaded.session.cache_slots, solved.session.cache_slots);
  // The same plan under a budget it does not fit is refused.
  from_file.budgets.ram = r.budgets.ram / 2;
  EXPECT_THROW(plan_run(*flash, from_file), Error);
}

// A plan with VRAM parts is made without a GPU (strata plan) and runs only on one
// (tests/test_split_ffn.cpp runs it on the reference device).
TEST(PlannedSession, HybridPlansAreMadeAnywhereAndRefusedOnTheCpu) {
  const std::string path = strata::testing::sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 8);
  auto m = Model::load(path, false);
  const ActivationCounts counts = profile_counts(*m);
  RunRequest r;
  r.mode = FfnMode::Predict;
  r.n_ctx = 32;
  r.profile = &counts;
  r.budgets.vram = 256 << 20;  // above what a CUDA session holds beside the plan
  r.allow_vram = true;
  const PlannedRun planned = make_plan(*m, r);  // planning needs no GPU
  EXPECT_GT(planned.plan.predicted.vram_bytes, 0u);
  r.allow_vram = false;
  try {
    plan_run(*m, r);
    FAIL() << "a VRAM plan ran without a GPU backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--vram-budget"), std::string::npos) << e.what();
  }
}

TEST(TransferQueue, RunsJobsInOrderAndReportsFailuresToTheirTicket) {
  TransferQueue q;
  std::vector<int> order;
  std::atomic<int> done{0};
  TransferQueue::Ticket last = 0;
  for (int i = 0; i < 20; ++i)
    last = q.submit([&, i] {
      order.push_back(i);
      ++done;
    });
  q.wait(last);
  EXPECT_EQ(done.load(), 20);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  const auto bad = q.submit([] { throw std::runtime_error("disk gone"); });
  const auto good = q.submit([&] { ++done; });
  EXPECT_THROW(q.wait(bad), std::runtime_error);
  q.wait(good);
  EXPECT_TRUE(q.done(good));
  EXPECT_EQ(done.load(), 21);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(PromptBatch, AFlashTierOnTheCpuTakesTheLargestBatchItsSpareRamAffords) {
  const int64_t base = Session::kMaxBatch;
  EXPECT_EQ(prompt_batch(0, false, true, std::nullopt, 1000), base) << "a model in RAM";
  EXPECT_EQ(prompt_batch(0, true, false, std::nullopt, 1000), base) << "below a device";
  EXPECT_EQ(prompt_batch(0, true, true, std::nullopt, 1000), kFlashPromptBatch) << "no budget";
  // 1 KiB a token beyond 64: 512 needs 448 KiB of buffers, 1/4 of 1792 KiB of spare RAM.
  EXPECT_EQ(prompt_batch(0, true, true, uint64_t{1792} << 10, 1024), 512);
  EXPECT_EQ(prompt_batch(0, true, true, (uint64_t{1792} << 10) - 1, 1024), 256);
  EXPECT_EQ(prompt_batch(0, true, true, uint64_t{256} << 10, 1024), 128);
  EXPECT_EQ(prompt_batch(0, true, true, uint64_t{255} << 10, 1024), base) << "a tight budget";
  EXPECT_EQ(prompt_batch(0, true, true, 0, 1024), base);
  EXPECT_EQ(prompt_batch(100, false, true, std::nullopt, 0), 100) << "-ub as asked";
  EXPECT_EQ(prompt_batch(32, true, false, std::nullopt, 0), 32);
  EXPECT_THROW(prompt_batch(128, true, false, std::nullopt, 0), Error) << "over 64 on a device";
  EXPECT_THROW(prompt_batch(Session::kMaxUbatch + 1, true, true, std::nullopt, 0), Error);
}

TEST(PromptBatch, APlannedFlashRunTakesLargerBatchesWithinItsBudget) {
  const std::string path = strata::testing::bundled_model(
      strata::testing::sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 4));
  const auto m = Model::load(path, false);
  RunRequest r;
  r.mode = FfnMode::Predict;
  r.n_ctx = 64;
  const PlannedRun free = plan_run(*m, r);
  EXPECT_EQ(free.session.max_batch, kFlashPromptBatch);
  // The budget's minimum at batches of 64 and a little more: the caches keep their RAM.
  RunRequest small = r;
  const Inventory inv = take_inventory(*m, {64, FfnMode::Predict, {}});
  small.budgets.ram = minimum_ram(inv) * 32 / 31 + (uint64_t{16} << 10);
  const PlannedRun tight = plan_run(*m, small);
  EXPECT_EQ(tight.session.max_batch, Session::kMaxBatch);
  EXPECT_LE(tight.inventory.fixed_ram_bytes, free.inventory.fixed_ram_bytes);
}

}  // namespace
}  // namespace strata
