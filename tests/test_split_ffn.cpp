// The FFN split between a device and RAM (PowerInfer's hybrid; tiers/split_ffn_store.h): the
// hot neurons' rows on the device (the reference device: its own memory and worker thread),
// the rest computed from RAM by the CPU at the same time, the two sums added in a fixed order.
// Equivalence: the same split computed on the CPU alone gives the same bits (the split fixes
// the order of additions, the devices do not); any split is within rounding of the unsplit
// FFN, and bit for bit when all or none of the neurons are on the device. Three tiers: a bundled
// model's hot neurons on the device, the rest from its RAM cache in front of flash.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/refdev/reference_device.h"
#include "core/error.h"
#include "offline/predictor_training.h"
#include "runtime/planned_session.h"
#include "runtime/session.h"
#include "tensor/kquants.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::bundled_model;
using strata::testing::sparse_tiny_model;

const std::vector<int32_t> kPrompt = {1, 5, 200, 17, 3, 99, 42, 7};

// Every weight type strata computes.
constexpr DType kEveryType[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                                DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Every `step`-th neuron of each layer (from `first`): a split that cuts every bucket.
std::vector<std::vector<int32_t>> every(const Model& m, int step, int first = 0) {
  std::vector<std::vector<int32_t>> v(static_cast<size_t>(m.config.n_layer));
  for (auto& l : v)
    for (int32_t i = first; i < m.config.n_ff; i += step) l.push_back(i);
  return v;
}

std::vector<std::vector<float>> run(const Model& m, Backend& be, SessionOptions o) {
  return strata::testing::prompt_and_decode_logits(m, be, o, kPrompt, {150, 8, 64, 33});
}

double max_relative(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t p = 0; p < a.size(); ++p) {
    double scale = 0, diff = 0;
    for (size_t i = 0; i < a[p].size(); ++i) {
      scale = std::max(scale, std::abs(double{b[p][i]}));
      diff = std::max(diff, std::abs(double{a[p][i]} - b[p][i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// A planned predict-mode run of 64 positions on the reference device.
RunRequest on_reference() {
  RunRequest r;
  r.mode = FfnMode::Predict;
  r.n_ctx = 64;
  r.device.device = "reference";
  return r;
}

// Bytes a session of 64 positions holds on the reference device: the whole model, and its
// dense blocks with the buffers (before any neuron).
struct DeviceSizes {
  uint64_t whole, dense;
};
DeviceSizes device_sizes(const Model& m, DType kv = DType::F32) {
  const Inventory inv = take_inventory(m, {64, FfnMode::Predict, kv, kv});
  return {device_session_bytes(m, inv, DeviceKind::Reference),
          device_session_bytes(m, inv, DeviceKind::Reference, false)};
}

size_t neurons_on_device(const SessionOptions& o) {
  size_t n = 0;
  for (const auto& l : o.vram_neurons) n += l.size();
  return n;
}

// A planned session's options for the same placement computed on the CPU alone.
SessionOptions cpu_alone(SessionOptions o) {
  o.host_backend = nullptr;
  o.host_layers.clear();
  o.output_on_host = false;
  return o;
}

// The most a reference device held at once.
uint64_t peak(const Backend& device) {
  return dynamic_cast<const ReferenceDevice&>(device).peak_allocated();
}

class SplitFfn : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  CpuBackend cpu{pool};
};

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
  EXPECT_EQ(dev->device(), Device::Cuda);
  EXPECT_EQ(run(*m, *dev, planned.session), run(*m, cpu, cpu_alone(planned.session)));
  EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";

  r.device.vram_budget = size.dense / 2;
  EXPECT_THROW(plan_run(*m, r), Error) << "the dense blocks do not fit";
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
  const Inventory inv = take_inventory(*m, {64, FfnMode::Predict, DType::F32, DType::F32});
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

// Three tiers: a bundled model's hot neurons on the device, the rest from a RAM cache so small
// that it evicts every token and serves a prompt in several passes, read from flash, computed
// by the CPU at the same time: the same split on one CPU gives the same bits, and any split is
// within rounding of the model in RAM unsplit.
TEST_F(SplitFfn, ThreeTiersGiveTheCpuAlonesBits) {
  for (DType type : kEveryType) {
    const std::string path = is_kquant(type) ? strata::testing::kquant_tiny_model(type, 0.2)
                                             : sparse_tiny_model(type, FfnActivation::ReGLU, 5);
    auto ram = Model::load(path, false);
    auto flash = Model::load(bundled_model(path), false);
    ASSERT_TRUE(flash->weights.bundled);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*flash, 3);
    o.cache_neurons = flash->config.n_ff / 4;
    o.window = 2;
    ReferenceDevice dev;
    SessionOptions on_dev = o;
    on_dev.host_backend = &cpu;
    const auto hybrid = run(*flash, dev, on_dev);
    EXPECT_EQ(hybrid, run(*flash, cpu, o)) << dtype_name(type) << ": the split on one CPU";
    EXPECT_LT(max_relative(hybrid, run(*ram, cpu, {FfnMode::Predict})), 1e-5)
        << dtype_name(type) << ": the model in RAM";
    EXPECT_EQ(dev.allocated(), 0u) << "the session left device memory behind";
  }
}

// Split reads (a missing neuron's gate row first) in the tier below the device change which
// bytes are read, never the values.
TEST_F(SplitFfn, ThreeTiersWithSplitReadsGiveTheSameBits) {
  SynthSpec spec = synth_preset("tiny");
  spec.type = DType::F32;
  spec.shape.ffn = FfnActivation::ReGLU;
  spec.shape.n_embd = 1024, spec.shape.n_head = 8, spec.shape.n_head_kv = 8;
  spec.shape.n_ff = 384, spec.shape.n_layer = 2;
  spec.density = 0.15;
  spec.predictor_rank = 32;
  spec.seed = 5;
  const std::string path = strata::testing::temp_file("split_reads_three_tiers.gguf");
  write_synthetic_model(spec, path);
  auto flash = Model::load(bundled_model(path), false);
  ASSERT_GT(flash->weights.bundle.bundle_bytes, flash->weights.bundle.head_bytes());
  SessionOptions o{FfnMode::Predict};
  o.vram_neurons = every(*flash, 4, 1);
  o.cache_neurons = 96;
  o.window = 2;
  o.host_backend = &cpu;
  ReferenceDevice dev;
  const auto whole_reads = run(*flash, dev, o);
  o.split_reads = true;
  ReferenceDevice dev2;
  EXPECT_EQ(run(*flash, dev2, o), whole_reads);
  SessionOptions alone = o;
  alone.host_backend = nullptr;
  EXPECT_EQ(run(*flash, cpu, alone), whole_reads) << "the same split on one CPU";
}

// Through the plan, as `strata run --device reference --vram-budget B --ram-budget R` on a
// bundled model: the dense blocks and the hottest neurons on the device, cache slots in RAM for
// the rest, flash behind them; the CPU alone's bits with the same placement.
TEST_F(SplitFfn, APlannedBundledRunPlacesVramRamAndFlash) {
  const std::string path = sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5);
  auto flash = Model::load(bundled_model(path), false);
  RunRequest r = on_reference();
  const DeviceSizes size = device_sizes(*flash);
  ASSERT_LT(size.dense, size.whole) << "a bundled model's whole FFN counts on the device";
  r.device.vram_budget = (size.whole + size.dense) / 2;
  PlannedRun planned = plan_run(*flash, r);
  ASSERT_TRUE(planned.device.split);
  EXPECT_GT(neurons_on_device(planned.session), 0u);
  EXPECT_LT(neurons_on_device(planned.session),
            static_cast<size_t>(flash->config.n_layer * flash->config.n_ff));
  ASSERT_EQ(planned.session.cache_slots.size(), static_cast<size_t>(flash->config.n_layer));
  auto dev = make_session_backend(planned, pool);
  const SessionOptions alone = cpu_alone(planned.session);
  {
    Session s(*flash, 64, *dev, planned.session);
    s.eval(kPrompt);
    EXPECT_GT(s.split_device_pairs(), 0u);
    EXPECT_GT(s.split_ram_pairs(), 0u);
    EXPECT_GT(s.flash_stats().bytes_read, 0u) << "the rest was read from flash";
    EXPECT_LE(peak(*dev), r.device.vram_budget) << "the budget is a hard limit";
  }
  EXPECT_EQ(run(*flash, *dev, planned.session), run(*flash, cpu, alone));

  // No budget: every neuron fits, still through the split store (whole on the device).
  RunRequest all = r;
  all.device.vram_budget = 0;
  PlannedRun everything = plan_run(*flash, all);
  ASSERT_TRUE(everything.device.split);
  EXPECT_EQ(neurons_on_device(everything.session),
            static_cast<size_t>(flash->config.n_layer * flash->config.n_ff));
  auto dev2 = make_session_backend(everything, pool);
  EXPECT_LT(
      max_relative(run(*flash, *dev2, everything.session), run(*flash, cpu, {FfnMode::Predict})),
      1e-5);

  r.device.vram_budget = size.dense / 2;
  EXPECT_THROW(plan_run(*flash, r), Error) << "not even one layer's dense blocks fit";
  r.device.vram_budget = 0;
  r.device.gpu_layers = 2;
  EXPECT_THROW(plan_run(*flash, r), Error) << "-ngl of some layers";
}

// Layers left on the CPU beside the device read their FFN from flash through the same caches.
TEST_F(SplitFfn, ThreeTiersWithLayersOnTheCpuGiveTheCpuAlonesBits) {
  auto flash =
      Model::load(bundled_model(sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 5)), false);
  SessionOptions o{FfnMode::Predict};
  o.vram_neurons = every(*flash, 3);
  o.vram_neurons[1].clear();
  o.cache_neurons = 96;
  SessionOptions alone = o;
  o.host_layers = {0, 1, 0};
  o.output_on_host = true;
  o.host_backend = &cpu;
  o.lookahead = true;  // has nothing to read ahead below a device's part: values unchanged
  ReferenceDevice dev;
  EXPECT_EQ(run(*flash, dev, o), run(*flash, cpu, alone));
}

TEST_F(SplitFfn, ABundledModelOnADeviceWithoutASplitIsAClearError) {
  auto flash =
      Model::load(bundled_model(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5)), false);
  ReferenceDevice dev;
  try {
    Session s(*flash, 16, dev, {FfnMode::Predict});
    FAIL() << "a bundled model ran on a device with no neurons placed there";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bundled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dev.allocated(), 0u);
}

// Random predictors of rank 16 (any selection shows the split's equality): the shipped model's
// own weights in predict mode.
std::string shipped_model_with_predictors() {
  const std::string out = strata::testing::temp_file("shipped_with_predictors.gguf");
  auto m = Model::load(strata::testing::source_file("models/strata-tiny.gguf"), false);
  const ModelConfig& c = m->config;
  std::vector<TrainedPredictor> predictors;
  uint64_t state = 7;
  auto next = [&] {  // uniform in [-1, 1): a fixed LCG, the same on every machine
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 11) / 4503599627370496.0 - 1.0);
  };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    TrainedPredictor p;
    p.rank = 16;
    for (int64_t i = 0; i < p.rank * c.n_embd; ++i) p.fc1.push_back(next());
    for (int64_t i = 0; i < c.n_ff * p.rank; ++i) p.fc2.push_back(next());
    p.threshold = 0.5f;
    predictors.push_back(std::move(p));
  }
  write_model_with_predictors(*m, predictors, DType::F16, false, out);
  return out;
}

TEST_F(SplitFfn, TheShippedModelSplitsAsTheCpuAloneInRamAndBundled) {
  const std::string path = shipped_model_with_predictors();
  for (bool bundle : {false, true}) {
    auto m = Model::load(bundle ? bundled_model(path) : path, false);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, 3, 2);
    if (bundle) o.cache_neurons = m->config.n_ff / 3;
    SessionOptions on_dev = o;
    on_dev.host_backend = &cpu;
    ReferenceDevice dev;
    const auto hybrid = run(*m, dev, on_dev);
    EXPECT_EQ(hybrid, run(*m, cpu, o)) << (bundle ? "bundled" : "in RAM");
    Session s(*m, 32, dev, on_dev);
    s.eval(kPrompt);
    EXPECT_GT(s.split_device_pairs(), 0u) << "the predictors select neurons on the device";
  }
}

// The 1B shape (TinyLlama's: n_embd 2048, n_ff 5632, 32 heads, 4 KV heads, 32,000 tokens), two
// of its layers, Q4_0, sparse by construction at 10%: hybrid in RAM and with three tiers.
TEST_F(SplitFfn, AOneBillionShapeSplitsAsTheCpuAlone) {
  const std::string path = strata::testing::temp_file("split_1b_shape.gguf");
  SynthSpec spec = synth_preset("1b");
  spec.type = DType::Q4_0;
  spec.shape.ffn = FfnActivation::ReGLU;
  spec.shape.n_layer = 2;
  spec.density = 0.1;
  spec.predictor_rank = 64;
  spec.seed = 11;
  write_synthetic_model(spec, path);
  for (bool bundle : {false, true}) {
    auto m = Model::load(bundle ? bundled_model(path) : path, false);
    ASSERT_EQ(m->config.n_ff, 5632);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*m, 2);
    if (bundle) o.cache_neurons = 1024;
    SessionOptions on_dev = o;
    on_dev.host_backend = &cpu;
    ReferenceDevice dev;
    const auto hybrid =
        strata::testing::prompt_and_decode_logits(*m, dev, on_dev, kPrompt, {150, 8});
    EXPECT_EQ(hybrid, strata::testing::prompt_and_decode_logits(*m, cpu, o, kPrompt, {150, 8}))
        << (bundle ? "bundled" : "in RAM");
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
    planning.k_type = planning.v_type = DType::F16;  // a GPU run's default
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
