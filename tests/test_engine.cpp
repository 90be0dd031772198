// The engine every command opens (engine/engine.h), the accelerator seam (backends/accelerator.h:
// a device declining a weight type keeps that layer on the CPU, planning/device_plan.h), and
// the server's request intake (server/request_intake.h).
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/refdev/reference_device.h"
#include "backends/registry.h"
#include "core/error.h"
#include "engine/engine.h"
#include "placement/solver.h"
#include "planning/device_plan.h"
#include "server/request_intake.h"
#include "test_helpers.h"

namespace strata {
namespace {

using testing::kquant_tiny_model;
using testing::temp_file;
using testing::tiny_model;

std::string shipped_model() {
  return std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf";
}

EngineOptions options_for(const std::string& path) {
  EngineOptions o;
  o.model_path = path;
  o.threads = 2;
  return o;
}

// Planning's notes, kept for a failing test's message.
std::vector<std::string> collected;
void collect(const std::string& note) {
  collected.push_back(note);
}

// The engine's session is the one a command built by hand before it: the same plan, backend
// and logits, bit for bit.
TEST(Engine, ItsSessionGivesTheLogitsOfASessionBuiltByHand) {
  Engine engine(options_for(shipped_model()), collect);
  Session& session = engine.start(64);
  EXPECT_EQ(session.n_ctx(), 64);
  EXPECT_EQ(engine.planned().device.kind, DeviceKind::Cpu);
  const Tokenizer& tok = *engine.model().tokenizer;
  const auto prompt = tok.encode("Once upon a time", tok.add_bos_default());
  const auto got = session.eval(prompt);
  const std::vector<float> engine_logits(got.begin(), got.end());

  auto model = Model::load(shipped_model());
  RunRequest r;
  r.n_ctx = 64;
  PlannedRun planned = plan_run(*model, r);
  ThreadPool pool(2);
  auto backend = make_session_backend(planned, pool);
  Session by_hand(*model, 64, *backend, planned.session);
  const auto want = by_hand.eval(prompt);
  EXPECT_EQ(engine_logits, std::vector<float>(want.begin(), want.end()));
  EXPECT_THROW(engine.start(64), Error) << "a second start would plan the model twice";
}

TEST(Engine, AutoModeIsPredictWithPredictorsAndDenseOtherwiseOrUnderInputSparsity) {
  EXPECT_EQ(resolve_ffn_mode(std::nullopt, SparsityMode::Off, true), FfnMode::Predict);
  EXPECT_EQ(resolve_ffn_mode(std::nullopt, SparsityMode::Off, false), FfnMode::Dense);
  EXPECT_EQ(resolve_ffn_mode(std::nullopt, SparsityMode::Teal, true), FfnMode::Dense);
  EXPECT_EQ(resolve_ffn_mode(FfnMode::GateFirst, SparsityMode::Off, true), FfnMode::GateFirst);
  Engine engine(options_for(shipped_model()), collect);
  EXPECT_EQ(engine.request().mode,
            engine.model().weights.has_predictors ? FfnMode::Predict : FfnMode::Dense);
}

// llama.cpp's optional ffn_gate.bias: the sparse modes pick neurons by a gate without it, so such
// a file runs dense only.
TEST(Engine, AGateBiasRunsDenseOnly) {
  ModelWeights w;
  w.layers.resize(2);
  for (FfnMode mode : {FfnMode::Dense, FfnMode::Predict, FfnMode::GateFirst})
    EXPECT_NO_THROW(check_mode_fits_weights(mode, w, "m.gguf"));
  w.layers[1].vectors[static_cast<size_t>(LayerVector::FfnGateBias)] = {0.5f, 0.25f};
  EXPECT_NO_THROW(check_mode_fits_weights(FfnMode::Dense, w, "m.gguf"));
  for (FfnMode mode : {FfnMode::Predict, FfnMode::GateFirst}) {
    try {
      check_mode_fits_weights(mode, w, "m.gguf");
      ADD_FAILURE() << "a sparse mode took a gate bias";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'m.gguf' has ffn_gate.bias"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Engine, AFileItCannotReadIsAOneLineErrorNamingIt) {
  EngineOptions o = options_for(shipped_model());
  o.files.plan = temp_file("engine_no_such_plan.json");
  Engine engine(std::move(o), collect);
  try {
    engine.start(32);
    FAIL() << "a missing plan file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("engine_no_such_plan.json"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Engine(options_for(temp_file("engine_no_such_model.gguf")), collect), Error);
}

TEST(Accelerators, TheRegistryFindsTheCudaProvidersAndTheirTypes) {
  const AcceleratorProvider* emu = find_accelerator("cuda-emu");
  ASSERT_NE(emu, nullptr);
  EXPECT_EQ(std::string(emu->name()), "cuda-emu");
  EXPECT_EQ(emu->device_count(), 1);
  EXPECT_GT(emu->info(0).total_bytes, 0u);
  EXPECT_TRUE(emu->reads_weights(DType::Q4_K));
  EXPECT_TRUE(emu->reads_weights(DType::BF16));
  EXPECT_TRUE(emu->reads_weights(DType::IQ2_XXS));  // the lattice types' traits decode there too
  EXPECT_TRUE(emu->reads_weights(DType::NVFP4));
  EXPECT_FALSE(emu->reads_weights(DType::Q8_1)) << "an activation type, not a weight type";
  EXPECT_GT(emu->overhead_bytes(), 0u);
  ASSERT_NE(find_accelerator("cuda"), nullptr);
  EXPECT_EQ(find_accelerator("cpu"), nullptr);
  EXPECT_EQ(find_accelerator("tpu"), nullptr);
  if (find_accelerator("cuda")->device_count() == 0) {
    const std::string why = find_accelerator("cuda")->unavailable_reason();
    EXPECT_FALSE(why.empty());
    // Not "CUDA driver version is insufficient" (an update to make) where there is no driver
    // (in a build with the CUDA backend: one without says so).
    const bool built = why.find("this build has no CUDA backend") == std::string::npos;
    if (built && !std::filesystem::exists("/proc/driver/nvidia/version")) {
      EXPECT_NE(why.find("no NVIDIA GPU driver is loaded"), std::string::npos) << why;
    }
  }
}

// A layer holding a type the device declines is computed on the CPU, attention and neurons.
TEST(DevicePlan, LayersOfATypeTheDeviceDeclinesStayOnTheCpu) {
  auto m = Model::load(kquant_tiny_model(DType::Q4_K), false);
  const size_t layers = m->weights.layers.size();
  std::vector<std::string> types;
  const auto no_q4k = [](DType t) { return t != DType::Q4_K; };
  const auto declined = declined_layers(m->weights, no_q4k, &types);
  EXPECT_EQ(declined, std::vector<uint8_t>(layers, 1));
  EXPECT_EQ(types, std::vector<std::string>{"Q4_K"});
  EXPECT_EQ(declined_layers(m->weights, [](DType) { return true; }),
            std::vector<uint8_t>(layers, 0));

  PlacementPlan p;
  p.layers.resize(layers);
  for (LayerPlan& l : p.layers) l.attention = Device::Accelerator, l.vram = {0, 1, 2};
  p.output = Device::Accelerator;
  std::vector<uint8_t> some(layers, 0);
  some[1] = 1;
  EXPECT_TRUE(keep_declined_on_host(p, some, false));
  EXPECT_EQ(p.layers[1].attention, Device::Host);
  EXPECT_TRUE(p.layers[1].vram.empty());
  EXPECT_EQ(p.layers[0].attention, Device::Accelerator);
  EXPECT_EQ(p.layers[0].vram.size(), 3u);
  EXPECT_EQ(p.output, Device::Accelerator);
  EXPECT_FALSE(keep_declined_on_host(p, some, false)) << "nothing left to move";
  EXPECT_TRUE(keep_declined_on_host(p, some, true));
  EXPECT_EQ(p.output, Device::Host);
}

// Every type this build computes on the CPU is one the CUDA kernels read today; a type they
// lacked would keep its layers on the CPU (the test above), never fail at the first product.
TEST(DevicePlan, TheEmulatedGpuTakesEveryLayerOfTheTypesItReads) {
  auto m = Model::load(tiny_model(DType::Q8_0, FfnActivation::SwiGLU), false);
  RunRequest r;
  r.n_ctx = 32;
  r.device.device = "cuda-emu";
  const PlannedRun run = make_plan(*m, r);
  ASSERT_EQ(run.device.kind, DeviceKind::Cuda);
  for (const LayerPlan& l : run.plan.layers) EXPECT_EQ(l.attention, Device::Accelerator);
  EXPECT_TRUE(run.session.host_layers.empty());
}

// A device whose kernels lack a type refuses a session over it with one line naming the weight;
// the layers a plan keeps on the CPU are not its to read.
TEST(DevicePlan, ASessionOnADeviceThatDeclinesATypeNamesTheWeight) {
  auto m = Model::load(tiny_model(DType::Q8_0, FfnActivation::SwiGLU), false);
  ReferenceDeviceOptions declining;
  declining.declined_types = {DType::Q8_0};
  ReferenceDevice device(declining);
  EXPECT_FALSE(device.reads_weights(DType::Q8_0));
  EXPECT_TRUE(device.reads_weights(DType::F16));
  try {
    Session session(*m, 16, device);
    FAIL() << "a session read weights its device declines";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0's attn_q is Q8_0"), std::string::npos)
        << e.what();
  }
  ReferenceDevice reading;
  EXPECT_NO_THROW(Session(*m, 16, reading));
}

httplib::Request head(const std::string& path) {
  httplib::Request r;
  r.method = "GET";
  r.path = path;
  return r;
}

TEST(RequestIntake, TheHeadIsRefusedInOrderBeforeAnyBodyIsRead) {
  const ServerState serving{true, false};
  EXPECT_EQ(refuse_head(head("/v1/models"), serving, "").status, 0);
  httplib::Request gz = head("/v1/models");
  gz.headers.emplace("Content-Encoding", "gzip");
  EXPECT_EQ(refuse_head(gz, serving, "").status, 415);
  EXPECT_EQ(refuse_head(head("/v1/models"), {false, false}, "").status, 503);
  EXPECT_EQ(refuse_head(head("/health"), {false, false}, "").status, 0) << "health says loading";
  EXPECT_EQ(refuse_head(head("/v1/models"), {true, true}, "").status, 503);
  EXPECT_EQ(refuse_head(head("/metrics"), {true, true}, "").status, 0);
  const HeadRefusal keyless = refuse_head(head("/v1/models"), serving, "secret");
  EXPECT_EQ(keyless.status, 401);
  EXPECT_NE(keyless.message.find("API key"), std::string::npos);
  httplib::Request keyed = head("/v1/models");
  keyed.headers.emplace("Authorization", "Bearer secret");
  EXPECT_EQ(refuse_head(keyed, serving, "secret").status, 0);
  EXPECT_EQ(refuse_head(head("/"), serving, "secret").status, 0) << "the page asks for the key";
}

}  // namespace
}  // namespace strata
