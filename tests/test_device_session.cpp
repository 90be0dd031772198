// A session on a device (the reference device: its own memory and queue, as a GPU) against the
// same session on the CPU: weights, rotation tables and logits go through uploads and
// downloads, every op gets device memory (the device refuses anything else), and the logits
// are the CPU's bit for bit, since the device computes with the CPU's kernels. What this holds
// is the forward pass's device plumbing; a GPU backend's arithmetic is held to the reference
// ops by tests/test_backend_ops.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"
#include "core/error.h"
#include "planning/planned_session.h"
#include "runtime/session.h"
#include "tensor/kquants.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::sparse_tiny_model;
using strata::testing::tiny_model;

const std::vector<int32_t> kDevicePrompt = {1, 5, 200, 17, 3, 99, 42, 7};
const int32_t kDecode[] = {150, 8, 64, 33};

// The prompt's logits (every token) and then each decoded token's.
std::vector<std::vector<float>> run(const Model& m, Backend& be, SessionOptions o) {
  return strata::testing::prompt_and_decode_logits(m, be, o, kDevicePrompt,
                                                   std::vector<int32_t>(kDecode, kDecode + 4));
}

// The layouts a plan gives the model on the CPU (interleaved Q4_0/Q8_0/Q4_K), which the
// reference device shares.
void adopt_cpu_layouts(Model& m, FfnMode mode) {
  m.adopt_layouts(
      [](const MatrixView& w, WeightUse use) { return CpuBackend::layout_for(w, use, true); },
      mode == FfnMode::Dense);
}

class DeviceSession : public ::testing::Test {
 protected:
  ThreadPool pool{2};
};

TEST_F(DeviceSession, ShippedModelGivesTheCpuLogitsBitForBit) {
  auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  CpuBackend cpu(pool);
  ReferenceDevice dev;
  EXPECT_EQ(run(*m, dev, {}), run(*m, cpu, {}));
  EXPECT_EQ(dev.allocated(), 0u) << "a session left device memory behind";
}

TEST_F(DeviceSession, EveryTypeDenseGivesTheCpuLogitsBitForBit) {
  for (DType type :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    auto m = Model::load(is_kquant(type) ? strata::testing::kquant_tiny_model(type)
                                         : tiny_model(type, FfnActivation::SwiGLU),
                         false);
    adopt_cpu_layouts(*m, FfnMode::Dense);
    CpuBackend cpu(pool);
    ReferenceDevice dev;
    for (DType kv : {DType::F32, DType::F16}) {
      SessionOptions o;
      o.kv = {kv, kv};
      EXPECT_EQ(run(*m, dev, o), run(*m, cpu, o)) << dtype_name(type) << " kv " << dtype_name(kv);
    }
  }
}

TEST_F(DeviceSession, BlockKvCachesGiveTheCpuLogits) {
  auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");  // heads of 32
  CpuBackend cpu(pool);
  ReferenceDevice dev;
  auto flat = [&](Backend& be, const SessionOptions& o) {
    std::vector<float> all;
    for (const auto& row : run(*m, be, o)) all.insert(all.end(), row.begin(), row.end());
    return all;
  };
  for (const auto& [k, v] : {std::pair{DType::Q8_0, DType::Q8_0}, {DType::Q4_0, DType::F16},
                            {DType::F16, DType::Q4_0}}) {
    SessionOptions o;
    o.kv = {k, v};
    const auto on_device = flat(dev, o), on_cpu = flat(cpu, o);
    EXPECT_LT(strata::testing::relative_difference(on_device, on_cpu), 1e-5)
        << dtype_name(k) << " / " << dtype_name(v);
    o.kv = {DType::F32, DType::F32};
    // The blocks' rounding moves the logits, a little (what -ctk says it does).
    const double moved = strata::testing::relative_difference(on_cpu, flat(cpu, o));
    EXPECT_GT(moved, 0.0);
    EXPECT_LT(moved, 5e-2);
  }
}

TEST_F(DeviceSession, SparseModesGiveTheCpuLogitsBitForBit) {
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    auto m = Model::load(sparse_tiny_model(type, FfnActivation::ReGLU, 5), false);
    adopt_cpu_layouts(*m, FfnMode::Predict);
    CpuBackend cpu(pool);
    ReferenceDevice dev;
    for (FfnMode mode : {FfnMode::Predict, FfnMode::GateFirst, FfnMode::Dense})
      EXPECT_EQ(run(*m, dev, {mode}), run(*m, cpu, {mode}))
          << dtype_name(type) << " " << ffn_mode_name(mode);
  }
}

TEST_F(DeviceSession, SequencesBatchedTogetherAndCopiedGiveTheCpuLogits) {
  auto m = Model::load(sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 5), false);
  adopt_cpu_layouts(*m, FfnMode::Predict);
  auto both = [&](Backend& be) {
    SessionOptions o{FfnMode::Predict};
    o.n_seq = 3;
    Session s(*m, 32, be, o);
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < kDevicePrompt.size(); ++i)
      batch.push_back({kDevicePrompt[i], static_cast<int32_t>(i % 2), true});
    std::vector<float> out;
    auto l = s.decode(batch);
    out.insert(out.end(), l.begin(), l.end());
    s.copy_sequence(0, 2, s.n_past(0));
    const BatchToken next[] = {{9, 2, true}, {11, 1, true}};
    l = s.decode(next);
    out.insert(out.end(), l.begin(), l.end());
    return out;
  };
  CpuBackend cpu(pool);
  ReferenceDevice dev;
  EXPECT_EQ(both(dev), both(cpu));
}

TEST_F(DeviceSession, CountsActivationsAsTheCpuDoes) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  CpuBackend cpu(pool);
  ReferenceDevice dev;
  for (FfnMode mode : {FfnMode::Predict, FfnMode::Dense}) {
    Session a(*m, 32, cpu, {mode}), b(*m, 32, dev, {mode});
    a.eval(kDevicePrompt);
    b.eval(kDevicePrompt);
    a.eval(3);
    b.eval(3);
    EXPECT_EQ(a.ffn_zeros(), b.ffn_zeros()) << ffn_mode_name(mode);
    EXPECT_LT(b.ffn_zeros()[0], b.ffn_activations_per_layer()) << "nothing was counted";
    for (size_t l = 0; l < a.ffn_stats().size(); ++l)
      EXPECT_EQ(a.ffn_stats()[l].computed, b.ffn_stats()[l].computed) << l;
  }
}

TEST_F(DeviceSession, TooSmallABudgetNamesWhatDidNotFit) {
  auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  ReferenceDeviceOptions o;
  o.budget = 64 << 10;
  ReferenceDevice dev(o);
  try {
    Session s(*m, 64, dev, {});
    FAIL() << "a session larger than the device's budget was made";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("needs"), std::string::npos) << what;
    EXPECT_NE(what.find("budget"), std::string::npos) << what;
  }
  EXPECT_EQ(dev.allocated(), 0u) << "a failed session left device memory behind";
}

TEST_F(DeviceSession, HostOnlyFeaturesAreClearErrors) {
  auto m = Model::load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5), false);
  ReferenceDevice dev;
  SessionOptions o{FfnMode::Predict};
  o.check_predictor = true;
  EXPECT_THROW(Session(*m, 16, dev, o), Error);
  Session s(*m, 16, dev, {});
  EXPECT_THROW(s.set_ffn_observer([](int64_t, int64_t, const float*, const float*) {}), Error);
}

// Through the plan, as the CLI runs (--device reference): the whole model on the device with
// an f16 KV cache by default, the plan saying so, the text the CPU's with the same cache; a
// budget the model does not fit is an error before any work.
TEST_F(DeviceSession, APlannedRunOnTheDeviceGivesTheCpuText) {
  auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  RunRequest r;
  r.n_ctx = 64;
  r.kv_types_given = false;
  r.device.device = "reference";
  PlannedRun dev_run = plan_run(*m, r);
  EXPECT_EQ(dev_run.device.kind, DeviceKind::Reference);
  EXPECT_EQ(dev_run.session.kv.k, DType::F16);
  EXPECT_EQ(dev_run.plan.output, Device::Accelerator);
  EXPECT_GT(dev_run.plan.predicted.vram_bytes, 0u);
  for (const LayerPlan& l : dev_run.plan.layers) EXPECT_EQ(l.attention, Device::Accelerator);
  RunRequest cpu_req = r;
  cpu_req.device = {};
  cpu_req.kv_types_given = true;
  cpu_req.kv = {DType::F16, DType::F16};
  PlannedRun cpu_run = plan_run(*m, cpu_req);
  EXPECT_EQ(cpu_run.device.kind, DeviceKind::Cpu);
  auto dev = make_session_backend(dev_run, pool);
  auto cpu = make_session_backend(cpu_run, pool);
  EXPECT_EQ(dev->device(), Device::Accelerator);
  EXPECT_EQ(run(*m, *dev, dev_run.session), run(*m, *cpu, cpu_run.session));

  r.device.vram_budget = 1 << 20;
  EXPECT_THROW(plan_run(*m, r), Error) << "a budget the model cannot fit";
}

}  // namespace
}  // namespace strata
