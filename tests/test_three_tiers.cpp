// Three tiers on a device (tiers/split_ffn_store.h over tiers/flash_ffn_store.h): a bundled
// model's hot neurons on the device (the reference device), the rest from its RAM caches in
// front of flash, computed by the CPU at the same time. The same split on the CPU alone gives
// the same bits (evicting caches, several passes, split reads, layers on the CPU, through the
// plan); the shipped model and a 1B-shape model split the same way in RAM and bundled.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "offline/predictor_training.h"
#include "split_testing.h"
#include "tensor/kquants.h"

namespace strata {
namespace {

using namespace strata::split_testing;
using strata::testing::bundled_model;
using strata::testing::sparse_tiny_model;

class ThreeTiers : public CpuBesideDevice {};

// Three tiers: a bundled model's hot neurons on the device, the rest from a RAM cache so small
// that it evicts every token and serves a prompt in several passes, read from flash, computed
// by the CPU at the same time: the same split on one CPU gives the same bits, and any split is
// within rounding of the model in RAM unsplit.
TEST_F(ThreeTiers, GiveTheCpuAlonesBitsInEveryType) {
  for (DType type : kEveryType) {
    const std::string path = is_kquant(type) ? strata::testing::kquant_tiny_model(type, 0.2)
                                             : sparse_tiny_model(type, FfnActivation::ReGLU, 5);
    auto ram = Model::load(path, false);
    auto flash = Model::load(bundled_model(path), false);
    ASSERT_TRUE(flash->weights.bundled);
    SessionOptions o{FfnMode::Predict};
    o.vram_neurons = every(*flash, 3);
    o.cache_neurons = flash->config.n_ff / 4;
    o.flash.window = 2;
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
TEST_F(ThreeTiers, SplitReadsGiveTheSameBits) {
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
  o.flash.window = 2;
  o.host_backend = &cpu;
  ReferenceDevice dev;
  const auto whole_reads = run(*flash, dev, o);
  o.flash.split_reads = true;
  ReferenceDevice dev2;
  EXPECT_EQ(run(*flash, dev2, o), whole_reads);
  SessionOptions alone = o;
  alone.host_backend = nullptr;
  EXPECT_EQ(run(*flash, cpu, alone), whole_reads) << "the same split on one CPU";
}

// Through the plan, as `strata run --device reference --vram-budget B --ram-budget R` on a
// bundled model: the dense blocks and the hottest neurons on the device, cache slots in RAM for
// the rest, flash behind them; the CPU alone's bits with the same placement.
TEST_F(ThreeTiers, APlannedBundledRunPlacesVramRamAndFlash) {
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
TEST_F(ThreeTiers, LayersOnTheCpuGiveTheCpuAlonesBits) {
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
  o.flash.lookahead = true;  // has nothing to read ahead below a device's part: values unchanged
  ReferenceDevice dev;
  EXPECT_EQ(run(*flash, dev, o), run(*flash, cpu, alone));
}

TEST_F(ThreeTiers, ABundledModelOnADeviceWithoutASplitIsAClearError) {
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

TEST_F(ThreeTiers, TheShippedModelSplitsAsTheCpuAloneInRamAndBundled) {
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
TEST_F(ThreeTiers, AOneBillionShapeSplitsAsTheCpuAloneInRamAndBundled) {
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

}  // namespace
}  // namespace strata
