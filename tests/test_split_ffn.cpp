// The FFN split between a device and RAM (PowerInfer's hybrid; tiers/split_ffn_store.h): the
// hot neurons' rows on the device (the reference device: its own memory and worker thread),
// the rest computed from RAM by the CPU at the same time, the two sums added in a fixed order.
// Equivalence: the same split computed on the CPU alone gives the same bits (the split fixes
// the order of additions, the devices do not); any split is within rounding of the unsplit
// FFN, and bit for bit when all or none of the neurons are on the device. Three tiers (a bundled
// model's rest from its RAM caches and flash): test_three_tiers.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "core/error.h"
#include "split_testing.h"
#include "tensor/kquants.h"

namespace strata {
namespace {

using namespace strata::split_testing;
using strata::testing::bundled_model;
using strata::testing::sparse_tiny_model;

class SplitFfn : public CpuBesideDevice {};

TEST_F(SplitFfn, ADeviceAndTheCpuTogetherGiveTheCpuAlonesBits) {
  for (DType type : kEveryType) {
    auto m = Model::load(is_kquant(type) ? strata::testing::kquant_tiny_model(type, 0.2)
                                         : sparse_tiny_model(type, FfnActivation::ReGLU, 5),
                         false);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, 3);
    ReferenceDevice dev;
    SessionOptions on_dev = o;
    on_dev.host_backend = &cpu;
    const auto hybrid = run(*m, dev, on_dev);
    EXPECT_EQ(hybrid, run(*m, cpu, o)) << dtype_name(type) << ": the split on one CPU";
    const auto whole = run(*m, cpu, {FfnMode::Predict});
    EXPECT_LT(max_relative(hybrid, whole), 1e-5) << dtype_name(type) << ": the unsplit FFN";
  }
}

TEST_F(SplitFfn, AllOrNoneOfTheNeuronsOnTheDeviceIsTheUnsplitFfnBitForBit) {
  auto m = Model::load(sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 5), false);
  const auto whole = run(*m, cpu, {FfnMode::Predict});
  for (int step : {1, 1 << 20}) {  // every neuron; none (only ids past n_ff would be picked)
    ReferenceDevice dev;
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, step);
    if (step > 1)
      for (auto& l : o.vram_neurons) l.clear();
    o.host_backend = &cpu;
    EXPECT_EQ(run(*m, dev, o), whole) << (step == 1 ? "all" : "none") << " on the device";
  }
}

// A server's batch: two sequences' tokens in one batch, each token's logits kept.
std::vector<float> two_sequences(const Model& m, Backend& be, SessionOptions o) {
  o.n_seq = 2;
  Session s(m, 32, be, o);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < kPrompt.size(); ++i)
    batch.push_back({kPrompt[i], static_cast<int32_t>(i % 2), true});
  const auto l = s.decode(batch);
  return std::vector<float>(l.begin(), l.end());
}

// In RAM and over three tiers (a bundled model, caches of 64 slots).
TEST_F(SplitFfn, BatchesOfSequencesSplitAsTheyComputeAlone) {
  const std::string path = sparse_tiny_model(DType::Q4_0, FfnActivation::ReGLU, 5);
  for (bool bundle : {false, true}) {
    auto m = Model::load(bundle ? bundled_model(path) : path, false);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, 2, 1);
    if (bundle) o.cache_neurons = 64;
    SessionOptions on_dev = o;
    on_dev.host_backend = &cpu;
    ReferenceDevice dev;
    EXPECT_EQ(two_sequences(*m, dev, on_dev), two_sequences(*m, cpu, o))
        << (bundle ? "three tiers" : "in RAM");
  }
}

TEST_F(SplitFfn, CountsWhereEachActivationWasComputed) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  ReferenceDevice dev;
  SessionOptions o{FfnMode::Predict};
  o.vram_neurons = every(*m, 4);
  o.host_backend = &cpu;
  Session s(*m, 32, dev, o);
  s.eval(kPrompt);
  uint64_t computed = 0;
  for (const FfnLayerStats& st : s.ffn_stats()) computed += st.computed;
  EXPECT_GT(s.split_device_pairs(), 0u);
  EXPECT_GT(s.split_ram_pairs(), s.split_device_pairs())
      << "a quarter of the neurons on the device";
  EXPECT_EQ(s.split_device_pairs() + s.split_ram_pairs(), computed);
  Session plain(*m, 32, cpu, {FfnMode::Predict});
  plain.eval(kPrompt);
  EXPECT_EQ(s.ffn_zeros(), plain.ffn_zeros()) << "the non-zero counts of both sides";
  // Rows read per side are whole neurons' rows; the link carries at least each layer's input
  // down and the RAM part's sum up.
  const Session::SplitTraffic t = s.split_traffic();
  const LayerWeights& l0 = m->weights.layers[0];
  const uint64_t row = l0.ffn_gate.row_bytes + l0.ffn_up.row_bytes + l0.ffn_down_t.row_bytes;
  EXPECT_GT(t.device_row_bytes, 0u);
  EXPECT_GT(t.ram_row_bytes, t.device_row_bytes);
  EXPECT_EQ(t.device_row_bytes % row, 0u);
  EXPECT_EQ(t.ram_row_bytes % row, 0u);
  const uint64_t activations = static_cast<uint64_t>(kPrompt.size() * m->config.n_embd * 4);
  EXPECT_GE(t.link_bytes, 2 * activations * static_cast<uint64_t>(m->config.n_layer));
  EXPECT_GT(s.times().ffn_ram_part, 0.0);
}

TEST_F(SplitFfn, MisuseAndBudgetsAreClearErrors) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  SessionOptions o{FfnMode::Predict};
  o.vram_neurons = every(*m, 2);
  ReferenceDevice dev;
  EXPECT_THROW(Session(*m, 16, dev, o), Error) << "no CPU backend for the RAM part";
  o.host_backend = &cpu;
  SessionOptions dense = o;
  dense.ffn = FfnMode::Dense;
  EXPECT_THROW(Session(*m, 16, dev, dense), Error) << "dense mode";
  SessionOptions bad = o;
  bad.vram_neurons[0] = {5, 3};
  EXPECT_THROW(Session(*m, 16, dev, bad), Error) << "ids not ascending";
  ReferenceDeviceOptions small;
  small.budget = 256 << 10;
  ReferenceDevice tight(small);
  try {
    Session s(*m, 16, tight, o);
    FAIL() << "the hot rows did not fit and nothing said so";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tight.allocated(), 0u);
}

// Through the plan, as `strata run --device reference --vram-budget B` with a model larger
// than B: the plan keeps every dense block on the device and fills the rest with neurons, the
// run splits its FFN, and gives the bits of the same split on one CPU.
TEST_F(SplitFfn, APlannedRunLargerThanItsVramBudgetSplitsItsFfn) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  RunRequest r = on_reference();
  const DeviceSizes size = device_sizes(*m);
  ASSERT_LT(size.dense, size.whole);
  r.device.vram_budget = (size.whole + size.dense) / 2;
  PlannedRun planned = plan_run(*m, r);
  ASSERT_TRUE(planned.device.split);
  ASSERT_EQ(planned.session.vram_neurons.size(), static_cast<size_t>(m->config.n_layer));
  EXPECT_GT(neurons_on_device(planned.session), 0u);
  EXPECT_LT(neurons_on_device(planned.session),
            static_cast<size_t>(m->config.n_layer * m->config.n_ff));
  auto dev = make_session_backend(planned, pool);
  ASSERT_NE(planned.session.host_backend, nullptr);
  EXPECT_EQ(dev->device(), Device::Accelerator);
  EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, cpu_alone(planned.session)));
  EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";

  r.device.vram_budget = size.dense / 2;
  EXPECT_THROW(plan_run(*m, r), Error) << "the dense blocks do not fit";
}

// A mixture's expert neurons split as a dense FFN's (the sparse modes' numbering: expert e's
// neuron i is e * n_ff + i): a cut through every expert, and whole experts on the device
// (KTransformers' split, here by the plan's units); the device routes, both sides mask the
// unchosen experts and weigh their neurons by the router, and the sums add in neuron order.
// In RAM and over three tiers; the same bits as the CPU alone, the unsplit FFN within rounding.
TEST_F(SplitFfn, AMixturesExpertNeuronsSplitAsTheCpuAloneComputesThem) {
  for (const DType type : {DType::F32, DType::Q4_0}) {
    const std::string path = strata::testing::sparse_moe_tiny_model(type);
    for (const bool bundle : {false, true}) {
      auto m = Model::load(bundle ? bundled_model(path) : path, false);
      if (!bundle) m->ensure_down_t();
      const int64_t ff = m->config.n_ff;
      std::vector<std::vector<int32_t>> experts_1_and_3(static_cast<size_t>(m->config.n_layer));
      for (auto& l : experts_1_and_3)
        for (const int64_t e : {1, 3})
          for (int64_t i = 0; i < ff; ++i) l.push_back(static_cast<int32_t>(e * ff + i));
      SessionOptions o{FfnMode::Predict};
      if (bundle) o.cache_neurons = 300, o.flash.window = 2;
      const auto whole = run(*m, cpu, o);
      for (const auto& vram : {every(*m, 3), experts_1_and_3}) {
        o.vram_neurons = vram;
        SessionOptions on_dev = o;
        on_dev.host_backend = &cpu;
        ReferenceDevice dev;
        const std::string what = std::string(dtype_name(type)) + (bundle ? " bundled" : " in RAM") +
                                 (vram == experts_1_and_3 ? ", experts 1 and 3" : ", every third");
        uint64_t device_pairs = 0, ram_pairs = 0;
        {
          Session s(*m, 32, dev, on_dev);
          s.eval(kPrompt);
          device_pairs = s.split_device_pairs(), ram_pairs = s.split_ram_pairs();
        }
        EXPECT_GT(device_pairs, 0u) << what;
        EXPECT_GT(ram_pairs, 0u) << what;
        const auto hybrid = run(*m, dev, on_dev);
        EXPECT_EQ(hybrid, run(*m, cpu, o)) << what << ": the split on one CPU";
        EXPECT_LT(max_relative(hybrid, whole), 1e-5) << what << ": the unsplit FFN";
      }
    }
  }
}

// Every neuron of the given experts in each layer (the sparse modes' numbering).
std::vector<std::vector<int32_t>> whole_experts_of(const Model& m, std::vector<int64_t> experts) {
  std::vector<std::vector<int32_t>> v(static_cast<size_t>(m.config.n_layer));
  for (auto& l : v)
    for (const int64_t e : experts)
      for (int64_t i = 0; i < m.config.n_ff; ++i)
        l.push_back(static_cast<int32_t>(e * m.config.n_ff + i));
  return v;
}

// KTransformers' split of a mixture with dense (SwiGLU) experts: whole experts on the device,
// the CPU computing the other chosen experts at the same time, each token's outputs mixed on
// the device in the order of its choice. Each expert is computed whole on one side, so the
// CPU alone gives the same bits (the reference device computes as the CPU does), in both
// tensor layouts, decode and prompt batches; a cut expert is refused by name.
TEST_F(SplitFfn, AMixturesDenseExpertsSplitWholeAsTheCpuAloneComputesThem) {
  for (const DType type : {DType::F32, DType::Q4_0})
    for (const bool stacked : {true, false}) {
      auto m = Model::load(strata::testing::tiny_moe_model(type, stacked), false);
      const auto alone = run(*m, cpu, {});
      for (const auto& experts : {std::vector<int64_t>{1, 3}, std::vector<int64_t>{0, 1, 2, 3},
                                  std::vector<int64_t>{}}) {
        SessionOptions o;
        o.vram_neurons = whole_experts_of(*m, experts);
        o.host_backend = &cpu;
        ReferenceDevice dev;
        const std::string what = std::string(dtype_name(type)) +
                                  (stacked ? " stacked, " : " per expert, ") +
                                  std::to_string(experts.size()) + " experts on the device";
        EXPECT_EQ(run(*m, dev, o), alone) << what;
        Session s(*m, 32, dev, o);
        s.eval(kPrompt);
        const uint64_t pairs = kPrompt.size() * static_cast<uint64_t>(m->config.n_layer *
                                                                      m->config.n_expert_used *
                                                                      m->config.n_ff);
        EXPECT_EQ(s.split_device_pairs() + s.split_ram_pairs(), pairs) << what;
        EXPECT_EQ(s.split_device_pairs() == 0, experts.empty()) << what;
        EXPECT_EQ(s.split_ram_pairs() == 0, experts.size() == 4) << what;
        EXPECT_GT(s.split_traffic().link_bytes, 0u) << what;
      }
    }
  // Qwen2-MoE's shared expert computes on the device with the dense blocks.
  {
    auto q = Model::load(strata::testing::tiny_arch_model("qwen2moe"), false);
    SessionOptions o;
    o.vram_neurons = whole_experts_of(*q, {1, 5});
    o.host_backend = &cpu;
    ReferenceDevice dev;
    EXPECT_EQ(run(*q, dev, o), run(*q, cpu, {})) << "qwen2moe";
  }
  auto m = Model::load(strata::testing::tiny_moe_model(DType::F32, true), false);
  SessionOptions cut;
  cut.vram_neurons = whole_experts_of(*m, {1});
  for (auto& l : cut.vram_neurons) l.pop_back();
  cut.host_backend = &cpu;
  ReferenceDevice dev;
  try {
    Session s(*m, 32, dev, cut);
    FAIL() << "a cut expert was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert 1"), std::string::npos) << e.what();
  }
}

// Through the plan, as `strata run --device reference --vram-budget B` with a dense mixture
// larger than B: the dense blocks and routers on the device, whole experts in what is left (a
// profile's most chosen first), the CPU alone's bits, the budget held.
TEST_F(SplitFfn, APlannedDenseMixtureSplitsWholeExpertsWithinTheBudget) {
  auto m = Model::load(strata::testing::tiny_moe_model(DType::F32, true, 8, 2), false);
  const Inventory inv = take_inventory(*m, {64, FfnMode::Dense, {DType::F32, DType::F32}});
  const uint64_t whole = device_session_bytes(*m, inv, DeviceKind::Reference);
  const uint64_t dense = device_session_bytes(*m, inv, DeviceKind::Reference, false);
  ASSERT_LT(dense, whole);
  const ActivationCounts counts = strata::testing::profile_counts(*m);
  for (const ActivationCounts* profile : {static_cast<const ActivationCounts*>(nullptr), &counts}) {
    RunRequest r = on_reference();
    r.mode = FfnMode::Dense;
    r.profile = profile;
    r.device.vram_budget = (whole + dense) / 2;
    PlannedRun planned = plan_run(*m, r);
    ASSERT_TRUE(planned.device.split);
    EXPECT_EQ(planned.plan.solver, "experts by share");
    size_t experts = 0;
    for (size_t l = 0; l < planned.session.vram_neurons.size(); ++l)
      for (const uint8_t held : whole_experts(planned.session.vram_neurons[l], m->config.n_ff,
                                              m->config.ffn_neurons(), static_cast<int64_t>(l)))
        experts += held;
    EXPECT_GT(experts, 0u);
    EXPECT_LT(experts, static_cast<size_t>(m->config.n_layer * m->config.n_expert));
    auto dev = make_session_backend(planned, pool);
    EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, {}));
    EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";
  }
}

// Through the plan: a mixture larger than its VRAM budget keeps its dense blocks and routers on
// the device and places expert neurons there up to the budget, which holds.
TEST_F(SplitFfn, APlannedMixtureSplitsItsExpertNeuronsWithinTheBudget) {
  auto m = Model::load(strata::testing::sparse_moe_tiny_model(DType::F16), false);
  m->ensure_down_t();
  RunRequest r = on_reference();
  const DeviceSizes size = device_sizes(*m);
  ASSERT_LT(size.dense, size.whole);
  r.device.vram_budget = (size.whole + size.dense) / 2;
  PlannedRun planned = plan_run(*m, r);
  ASSERT_TRUE(planned.device.split);
  EXPECT_GT(neurons_on_device(planned.session), 0u);
  EXPECT_LT(neurons_on_device(planned.session),
            static_cast<size_t>(m->config.n_layer * m->config.ffn_neurons()));
  auto dev = make_session_backend(planned, pool);
  EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, cpu_alone(planned.session)));
  EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";
}

// The ILP weighs the device against the CPU alone: where its cost model predicts the CPU faster
// (here a device that reads 1 MB/s) it places nothing there and the run says so and runs on the
// CPU; a fast device gets the split. Both with a profile, so the ILP decides.
TEST_F(SplitFfn, AnIlpPlanThatPrefersTheCpuRunsThereAndSaysSo) {
  auto m = Model::load(strata::testing::sparse_moe_tiny_model(DType::F16), false);
  m->ensure_down_t();
  const ActivationCounts counts = strata::testing::profile_counts(*m);
  RunRequest r = on_reference();
  r.profile = &counts;
  r.solver = SolverChoice::Ilp;
  r.vram_bandwidth_given = true;
  const DeviceSizes size = device_sizes(*m);
  r.device.vram_budget = (size.whole + size.dense) / 2;
  r.costs.vram_bytes_per_s = 1e6;
  const PlannedRun slow = plan_run(*m, r);
  EXPECT_EQ(slow.device.kind, DeviceKind::Cpu);
  EXPECT_TRUE(slow.session.vram_neurons.empty());
  bool said = false;
  for (const std::string& note : slow.notes) said |= note.find("CPU alone faster") != std::string::npos;
  EXPECT_TRUE(said) << "the run says why the GPU is idle";
  r.costs.vram_bytes_per_s = 1e12;
  const PlannedRun fast = plan_run(*m, r);
  EXPECT_TRUE(fast.device.split);
  EXPECT_GT(neurons_on_device(fast.session), 0u);
}

// Layers whose attention the plan leaves on the CPU compute wholly there (attention with their
// own KV cache, predictor, FFN), the residual stream moving between the devices: the same
// bits as the CPU alone, with the output head on either side.
TEST_F(SplitFfn, LayersOnTheCpuBesideTheDeviceGiveTheCpuAlonesBits) {
  auto m = Model::load(sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 5), false);
  for (bool output_on_cpu : {false, true})
    for (const std::vector<uint8_t>& cpu_layers :
         {std::vector<uint8_t>{0, 1, 1}, std::vector<uint8_t>{1, 0, 1}}) {
      SessionOptions o{FfnMode::Predict};
      o.vram_neurons = every(*m, 3);
      for (size_t l = 0; l < cpu_layers.size(); ++l)
        if (cpu_layers[l]) o.vram_neurons[l].clear();
      SessionOptions alone = o;
      o.host_layers = cpu_layers;
      o.output_on_host = output_on_cpu;
      o.host_backend = &cpu;
      ReferenceDevice dev;
      EXPECT_EQ(run(*m, dev, o), run(*m, cpu, alone))
          << "layers on the CPU " << int{cpu_layers[0]} << int{cpu_layers[1]} << int{cpu_layers[2]}
          << (output_on_cpu ? ", output on the CPU" : "");
    }
}

// Through the plan: a budget above one layer's dense blocks but below all of them puts the
// first layers on the device and the rest (here the last layer and the output head) on the CPU.
TEST_F(SplitFfn, APlannedRunBelowItsDenseBlocksLeavesLayersOnTheCpu) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  RunRequest r = on_reference();
  const Inventory inv = take_inventory(*m, {64, FfnMode::Predict, {DType::F32, DType::F32}});
  const uint64_t dense = device_sizes(*m).dense;
  r.device.vram_budget =
      dense - inv.output_bytes / 2 - inv.layers.back().dense_bytes - inv.layers.back().kv_bytes;
  PlannedRun planned = plan_run(*m, r);
  ASSERT_TRUE(planned.device.split);
  ASSERT_FALSE(planned.session.host_layers.empty()) << "every layer fitted";
  EXPECT_EQ(planned.session.host_layers.back(), 1) << "the last layer on the CPU";
  EXPECT_EQ(planned.session.host_layers.front(), 0) << "the first on the device";
  auto dev = make_session_backend(planned, pool);
  const SessionOptions alone = cpu_alone(planned.session);
  EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, alone));
  EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";
}

// -ngl N as llama.cpp counts: the last N layers on the device whole, the first ones and the
// output head on the CPU; the CPU alone's bits in dense and predict mode.
TEST_F(SplitFfn, NglOfSomeLayersPutsTheLastOnTheDevice) {
  auto m = Model::load(sparse_tiny_model(DType::Q4_0, FfnActivation::ReGLU, 5), false);
  for (FfnMode mode : {FfnMode::Dense, FfnMode::Predict})
    for (int ngl : {1, 2, 3}) {
      RunRequest r;
      r.mode = mode;
      r.n_ctx = 64;
      r.device.device = "reference";
      r.device.gpu_layers = ngl;
      PlannedRun planned = plan_run(*m, r);
      ASSERT_EQ(planned.device.gpu_layers, ngl);
      ASSERT_EQ(planned.session.host_layers.size(), 3u);
      EXPECT_EQ(planned.session.host_layers[0], ngl < 3 ? 1 : 0);
      EXPECT_EQ(planned.session.host_layers[2], 0) << "the last layer on the device";
      EXPECT_TRUE(planned.session.output_on_host);
      auto dev = make_session_backend(planned, pool);
      const SessionOptions alone = cpu_alone(planned.session);
      EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, alone))
          << ffn_mode_name(mode) << " -ngl " << ngl;
      EXPECT_EQ(dev->allocated(), 0u) << "the session left device memory behind";
    }
}

// A plan saved by `strata plan --vram-budget B -o` runs on a device under B (the plan leaves room
// for what the session holds beside it) and gives the CPU alone's bits for its placement; under
// a smaller budget, or on the CPU, it is a clear error.
TEST_F(SplitFfn, ASavedPlanWithVramPartsRunsOnTheDevice) {
  for (bool bundle : {false, true}) {
    const std::string path = sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 5);
    auto m = Model::load(bundle ? bundled_model(path) : path, false);
    const DeviceSizes size = device_sizes(*m, DType::F16);  // a GPU run's KV cache
    RunRequest planning;
    planning.mode = FfnMode::Predict;
    planning.n_ctx = 64;
    planning.kv = {DType::F16, DType::F16};  // a GPU run's default
    planning.allow_vram = true;
    // strata plan leaves room for a CUDA session's own buffers; the reference device needs less.
    planning.budgets.vram = (size.whole + size.dense) / 2 + cuda_backend_overhead_bytes();
    const nlohmann::json saved = plan_to_json(make_plan(*m, planning).plan);

    RunRequest r = on_reference();
    r.kv_types_given = false;
    r.device.vram_budget = planning.budgets.vram;
    r.plan = &saved;
    PlannedRun planned = plan_run(*m, r);
    ASSERT_TRUE(planned.device.split);
    EXPECT_GT(neurons_on_device(planned.session), 0u);
    auto dev = make_session_backend(planned, pool);
    const SessionOptions alone = cpu_alone(planned.session);
    EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, alone)) << (bundle ? "bundled" : "");
    EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";

    r.device.vram_budget = size.dense;  // room for a split, not for this plan's neurons
    try {
      plan_run(*m, r);
      FAIL() << "a plan over its device's budget ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("plan again"), std::string::npos) << e.what();
    }
    RunRequest on_cpu = r;
    on_cpu.device = {};
    try {
      plan_run(*m, on_cpu);
      FAIL() << "a plan with VRAM parts ran on the CPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--vram-budget"), std::string::npos) << e.what();
    }
  }
}

// The output head on the CPU takes no device memory (a plan that leaves it there counts none).
TEST_F(SplitFfn, AnOutputHeadOnTheCpuTakesNoDeviceMemory) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  auto held = [&](bool output_on_host) {
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, 3);
    o.host_backend = &cpu;
    o.output_on_host = output_on_host;
    if (output_on_host) o.host_layers.assign(3, 0);
    ReferenceDevice dev;
    Session s(*m, 32, dev, o);
    s.eval(kPrompt);
    return dev.allocated();
  };
  const ModelWeights& w = m->weights;
  const uint64_t output = w.output.bytes() + w.output_norm.size() * sizeof(float) +
                          static_cast<uint64_t>(Session::kMaxBatch * m->config.n_vocab) * 4;
  EXPECT_EQ(held(false) - held(true), output) << "the head, its norm and the logits rows";
}

// The report counts the rows the layers on the CPU read and the residual stream's moves.
TEST_F(SplitFfn, TheReportCountsTheLayersOnTheCpu) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  SessionOptions o{FfnMode::Predict};
  o.vram_neurons = every(*m, 3);
  o.vram_neurons[1].clear();
  o.host_layers = {0, 1, 0};
  o.host_backend = &cpu;
  ReferenceDevice dev;
  Session s(*m, 32, dev, o);
  s.eval(kPrompt);
  const Session::SplitTraffic t = s.split_traffic();
  const FfnLayerStats& on_cpu = s.ffn_stats()[1];
  const LayerWeights& l1 = m->weights.layers[1];
  const uint64_t row = l1.ffn_gate.row_bytes + l1.ffn_up.row_bytes + l1.ffn_down_t.row_bytes;
  ASSERT_GT(on_cpu.rows_read, 0u);
  EXPECT_GE(t.ram_row_bytes, on_cpu.rows_read * row);
  const uint64_t residual = kPrompt.size() * static_cast<uint64_t>(m->config.n_embd) * 4;
  EXPECT_GE(t.link_bytes, 2 * residual) << "to the CPU's layer and back";
  EXPECT_EQ(s.split_device_pairs() + s.split_ram_pairs(),
            s.ffn_stats()[0].computed + on_cpu.computed + s.ffn_stats()[2].computed);
}

}  // namespace
}  // namespace strata
