// Whole models on the GPU against the CPU (skipped, not passed, where no CUDA GPU can be used):
// logits within a documented tolerance for every weight type on the shipped model and synth
// models, the shipped model's greedy text equal, the same bits on every run, predict mode, a
// budget too small as a clear error; the split FFN (the GPU and the CPU at once, in RAM and with
// three tiers) against the same split on the CPU alone, directly and through the plan.
// STRATA_GPU_MODELS (a folder, scripts/gpu_check.sh sets it) adds its 1B-shape models (*.gguf) to
// the comparison.
//
// Tolerance: max |gpu - cpu| / max |cpu| over a position's logits. The GPU multiplies f32
// activations (f16 in cuBLAS above 8 tokens); the CPU rounds activations to Q8 blocks for
// quantized weights: 4e-2 for quantized types, 5e-3 for float types. (Measured on the emulated
// GPU, whose arithmetic is the GPU's: 2.5e-2 to 3.2e-2 for the quantized tiny models, 1.4e-3 at
// most for float ones. That the gap is the CPU's rounding, not a GPU error, Every/BackendOps
// checks op by op: the CUDA products equal the unrounded reference within 1e-5.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"
#include "planning/planned_session.h"
#include "runtime/session.h"
#include "split_testing.h"
#include "tensor/kquants.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::sparse_tiny_model;
using strata::testing::tiny_model;

const std::vector<int32_t> kPrompt = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33};

// Each test runs on the GPU ("cuda": skipped where none can be used) and on the emulated GPU
// ("cuda-emu": the same backend code and kernels, run on the CPU by backends/cuda/emu).
class CudaSession : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!emulated() && cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
    gpu = make({});
  }
  bool emulated() const { return GetParam() == "cuda-emu"; }
  std::unique_ptr<Backend> make(const CudaOptions& o) const {
    return emulated() ? make_cuda_emu_backend(o) : make_cuda_backend(o);
  }
  ThreadPool pool{2};
  std::unique_ptr<Backend> gpu;
};

// The prompt's logits (every position, one row each) then 4 tokens decoded one at a time.
std::vector<std::vector<float>> logits(const Model& m, Backend& be, SessionOptions o = {}) {
  auto rows = strata::testing::prompt_and_decode_logits(m, be, o, kPrompt, {3, 9, 27, 81});
  const size_t v = static_cast<size_t>(m.config.n_vocab);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < kPrompt.size(); ++i)
    out.emplace_back(rows[0].begin() + static_cast<long>(i * v),
                     rows[0].begin() + static_cast<long>((i + 1) * v));
  out.insert(out.end(), rows.begin() + 1, rows.end());
  return out;
}

double tolerance(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ? 5e-3 : 4e-2;
}

void expect_close(const std::vector<std::vector<float>>& gpu,
                  const std::vector<std::vector<float>>& cpu, double tol, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  double worst = 0;
  for (size_t p = 0; p < cpu.size(); ++p) {
    double scale = 0, diff = 0;
    for (size_t i = 0; i < cpu[p].size(); ++i) {
      scale = std::max(scale, std::abs(double{cpu[p][i]}));
      diff = std::max(diff, std::abs(double{gpu[p][i]} - cpu[p][i]));
    }
    worst = std::max(worst, diff / scale);
    EXPECT_LE(diff / scale, tol) << what << " position " << p;
  }
  std::printf("%s: max relative logit error %.2e\n", what.c_str(), worst);
}

// A Rows-layout model (the CUDA kernels' layout) and the CPU on the same file.
std::unique_ptr<Model> load(const std::string& path) {
  return Model::load(path, false);
}

TEST_P(CudaSession, ShippedModelLogitsAndGreedyTextAreTheCpus) {
  auto m = load(strata::testing::source_file("models/strata-tiny.gguf"));
  CpuBackend cpu(pool);
  const auto want = logits(*m, cpu), got = logits(*m, *gpu);
  expect_close(got, want, tolerance(m->weights.layers[0].attn_q.type), "shipped model");
  // Greedy text: 32 tokens chosen on each device from the same start.
  auto greedy = [&](Backend& be) {
    Session s(*m, 64, be, {});
    std::vector<int32_t> out;
    int32_t t = 1;
    for (int i = 0; i < 32; ++i) {
      const auto l = s.eval(t);
      t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
      out.push_back(t);
    }
    return out;
  };
  EXPECT_EQ(greedy(*gpu), greedy(cpu));
}

TEST_P(CudaSession, EveryTypeIsWithinTolerance) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                     DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K}) {
    auto m = load(is_kquant(type) ? strata::testing::kquant_tiny_model(type)
                                  : tiny_model(type, FfnActivation::SwiGLU));
    CpuBackend cpu(pool);
    expect_close(logits(*m, *gpu), logits(*m, cpu), tolerance(type), dtype_name(type));
  }
}

// Mixtures of experts on the device: the dense mixture (F32 and Q4_0 experts), and dReLU
// experts sparse by construction in gate-first and predict mode (the router's mask and the
// experts' weights as device ops), against the CPU.
TEST_P(CudaSession, MixturesOfExpertsAreWithinToleranceOfTheCpu) {
  CpuBackend cpu(pool);
  for (const DType type : {DType::F32, DType::Q4_0}) {
    SynthSpec s = synth_preset("tiny");
    s.shape.n_embd = 128, s.shape.n_ff = 256, s.shape.n_layer = 2;
    s.shape.n_expert = 4, s.shape.n_expert_used = 2;
    s.type = type, s.seed = 12;
    const std::string dense = strata::testing::temp_file(
        std::string("cuda_moe_") + dtype_name(type) + ".gguf");
    write_synthetic_model(s, dense);
    auto m = load(dense);
    expect_close(logits(*m, *gpu), logits(*m, cpu), tolerance(type),
                 std::string("mixture ") + dtype_name(type));
    s.shape.ffn = FfnActivation::DReLU, s.density = 0.1, s.predictor_rank = 32;
    const std::string sparse = strata::testing::temp_file(
        std::string("cuda_moe_sparse_") + dtype_name(type) + ".gguf");
    write_synthetic_model(s, sparse);
    auto ms = load(sparse);
    ms->ensure_down_t();
    for (const FfnMode mode : {FfnMode::GateFirst, FfnMode::Predict}) {
      SessionOptions o;
      o.ffn = mode;
      expect_close(logits(*ms, *gpu, o), logits(*ms, cpu, o), tolerance(type),
                   std::string("sparse mixture ") + dtype_name(type) + " " + ffn_mode_name(mode));
    }
  }
  // GLM-4.5's recipe: a leading dense layer held as an always-used expert, sigmoid routing with
  // the correction bias (a vector the device holds), an ungated shared expert.
  SynthSpec g = synth_preset("tiny");
  g.shape.architecture = "glm4moe";
  g.shape.n_embd = 128, g.shape.n_ff = 64, g.shape.n_layer = 3, g.shape.head_dim = 32;
  g.shape.n_expert = 6, g.shape.n_expert_used = 2;
  g.type = DType::Q4_0, g.seed = 12;
  const std::string glm = strata::testing::temp_file("cuda_glm4moe.gguf");
  write_synthetic_model(g, glm);
  auto mg = load(glm);
  expect_close(logits(*mg, *gpu), logits(*mg, cpu), tolerance(DType::Q4_0), "glm4moe Q4_0");
}

TEST_P(CudaSession, TheSameInputsGiveTheSameBitsEveryRun) {
  auto m = load(tiny_model(DType::Q4_0, FfnActivation::SwiGLU));
  const auto first = logits(*m, *gpu);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(logits(*m, *gpu), first) << "run " << i;
  auto sparse = load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5));
  const SessionOptions predict{FfnMode::Predict};
  EXPECT_EQ(logits(*sparse, *gpu, predict), logits(*sparse, *gpu, predict));
}

TEST_P(CudaSession, SparseModesAreWithinToleranceOfTheCpu) {
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    auto m = load(sparse_tiny_model(type, FfnActivation::ReGLU, 5));
    CpuBackend cpu(pool);
    for (FfnMode mode : {FfnMode::Predict, FfnMode::GateFirst})
      expect_close(logits(*m, *gpu, {mode}), logits(*m, cpu, {mode}), tolerance(type),
                   std::string(dtype_name(type)) + " " + ffn_mode_name(mode));
  }
}

TEST_P(CudaSession, KvCacheInF16IsWithinToleranceOfTheCpusF16Cache) {
  auto m = load(strata::testing::source_file("models/strata-tiny.gguf"));
  CpuBackend cpu(pool);
  SessionOptions o;
  o.kv = {DType::F16, DType::F16};
  expect_close(logits(*m, *gpu, o), logits(*m, cpu, o), 5e-3, "f16 KV cache");
}

// The kernels store and read blocks as the CPU does (BackendOps checks them op by op, on the
// same inputs, both types); over a model, a key that differs in its last bit may round to the
// next step of its block, which Q4_0's 16 steps make larger (measured 1.6e-2 for Q4_0 keys and
// values, 2.0e-3 for Q8_0's).
TEST_P(CudaSession, BlockKvCachesAreWithinToleranceOfTheCpusBlockCaches) {
  auto m = load(strata::testing::source_file("models/strata-tiny.gguf"));
  CpuBackend cpu(pool);
  SessionOptions o;
  o.kv = {DType::Q8_0, DType::Q4_0};
  expect_close(logits(*m, *gpu, o), logits(*m, cpu, o), 3e-2, "q8_0 keys, q4_0 values");
}

TEST_P(CudaSession, TooSmallABudgetNamesWhatDidNotFit) {
  auto m = load(strata::testing::source_file("models/strata-tiny.gguf"));
  CudaOptions o;
  o.budget = cuda_backend_overhead_bytes() + (1 << 20);
  auto small = make(o);
  try {
    Session s(*m, 64, *small, {});
    FAIL() << "a session larger than the budget was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
}

TEST_P(CudaSession, OneBillionShapeModelsAreWithinTolerance) {
  const char* dir = std::getenv("STRATA_GPU_MODELS");
  if (dir == nullptr) GTEST_SKIP() << "STRATA_GPU_MODELS is not set (scripts/gpu_check.sh sets it)";
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf" || e.path().filename().string().rfind("cmp-", 0) != 0)
      continue;
    auto m = load(e.path().string());
    CpuBackend cpu(pool);
    expect_close(logits(*m, *gpu), logits(*m, cpu), tolerance(m->weights.layers[0].ffn_up.type),
                 e.path().filename().string());
    ++seen;
  }
  EXPECT_GT(seen, 0) << "no cmp-*.gguf in " << dir;
}

// PowerInfer's hybrid: hot neurons on the GPU, the rest computed by the CPU at the same time,
// from RAM or (bundled) from evicting RAM caches in front of flash; against the same split on
// the CPU alone, and the same bits on every run.
TEST_P(CudaSession, SplitFfnIsWithinToleranceOfTheCpu) {
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    const std::string path = is_kquant(type) ? strata::testing::kquant_tiny_model(type, 0.2)
                                             : sparse_tiny_model(type, FfnActivation::ReGLU, 5);
    for (bool bundle : {false, true}) {
      auto m = load(bundle ? strata::testing::bundled_model(path) : path);
      SessionOptions o{FfnMode::Predict};
      o.vram_neurons = split_testing::every(*m, 3);  // cuts every bucket of ids
      if (bundle) o.cache_neurons = m->config.n_ff / 4, o.flash.window = 2;
      CpuBackend cpu(pool);
      SessionOptions on_gpu = o;
      on_gpu.host_backend = &cpu;
      const std::string what =
          std::string(dtype_name(type)) + (bundle ? " split, three tiers" : " split");
      const uint64_t own = gpu->allocated();  // the backend's own scratch
      const auto got = logits(*m, *gpu, on_gpu);
      expect_close(got, logits(*m, cpu, o), tolerance(type), what);
      EXPECT_EQ(logits(*m, *gpu, on_gpu), got) << what << ": the same bits every run";
      EXPECT_EQ(gpu->allocated(), own) << what << ": the session left GPU memory behind";
    }
  }
}

// A mixture's expert neurons split: every third (cutting every expert) and whole experts 1
// and 3 on the GPU (KTransformers' split, by the plan's units), the rest on the CPU from RAM or
// (bundled) its caches in front of flash, at the same time; against the same split on the CPU.
TEST_P(CudaSession, MixtureSplitAcrossTheGpuAndTheCpuIsWithinToleranceOfTheCpu) {
  for (const DType type : {DType::F16, DType::Q4_0}) {
    const std::string path = strata::testing::sparse_moe_tiny_model(type);
    for (const bool bundle : {false, true}) {
      auto m = load(bundle ? strata::testing::bundled_model(path) : path);
      if (!bundle) m->ensure_down_t();
      const int64_t ff = m->config.n_ff;
      auto experts_1_and_3 = split_testing::every(*m, 1 << 20);
      for (auto& l : experts_1_and_3) {
        l.clear();
        for (const int64_t e : {1, 3})
          for (int64_t i = 0; i < ff; ++i) l.push_back(static_cast<int32_t>(e * ff + i));
      }
      for (const auto& vram : {split_testing::every(*m, 3), experts_1_and_3}) {
        SessionOptions o{FfnMode::Predict};
        o.vram_neurons = vram;
        if (bundle) o.cache_neurons = 300, o.flash.window = 2;
        CpuBackend cpu(pool);
        SessionOptions on_gpu = o;
        on_gpu.host_backend = &cpu;
        const std::string what = std::string("mixture ") + dtype_name(type) +
                                 (bundle ? " bundled" : " in RAM") +
                                 (vram == experts_1_and_3 ? ", experts 1 and 3" : ", every third");
        const uint64_t own = gpu->allocated();
        const auto got = logits(*m, *gpu, on_gpu);
        expect_close(got, logits(*m, cpu, o), tolerance(type), what);
        EXPECT_EQ(logits(*m, *gpu, on_gpu), got) << what << ": the same bits every run";
        EXPECT_EQ(gpu->allocated(), own) << what << ": the session left GPU memory behind";
      }
    }
  }
}

// KTransformers' split of dense (SwiGLU) experts: experts 1 and 3 of each layer on the GPU, the
// CPU computing the other chosen experts at the same time; against the CPU alone.
TEST_P(CudaSession, DenseExpertsSplitWholeAreWithinToleranceOfTheCpu) {
  for (const DType type : {DType::F32, DType::Q4_0}) {
    auto m = load(strata::testing::tiny_moe_model(type, true));
    SessionOptions o;
    o.vram_neurons.resize(static_cast<size_t>(m->config.n_layer));
    for (auto& l : o.vram_neurons)
      for (const int64_t e : {1, 3})
        for (int64_t i = 0; i < m->config.n_ff; ++i)
          l.push_back(static_cast<int32_t>(e * m->config.n_ff + i));
    CpuBackend cpu(pool);
    o.host_backend = &cpu;
    const std::string what = std::string("experts split ") + dtype_name(type);
    const uint64_t own = gpu->allocated();
    const auto got = logits(*m, *gpu, o);
    expect_close(got, logits(*m, cpu), tolerance(type), what);
    EXPECT_EQ(logits(*m, *gpu, o), got) << what << ": the same bits every run";
    EXPECT_EQ(gpu->allocated(), own) << what << ": the session left GPU memory behind";
  }
}

// Through the plan, as `strata run --vram-budget B` with a model larger than B: the run splits,
// layers the budget cannot hold compute on the CPU, and the budget holds.
TEST_P(CudaSession, APlannedSplitRunStaysWithinItsBudget) {
  auto m = load(sparse_tiny_model(DType::F16, FfnActivation::ReGLU, 5));
  const Inventory inv = take_inventory(*m, {64, FfnMode::Predict, {DType::F16, DType::F16}});
  const uint64_t whole = device_session_bytes(*m, inv, DeviceKind::Cuda);
  const uint64_t dense = device_session_bytes(*m, inv, DeviceKind::Cuda, false);
  for (uint64_t budget : {(whole + dense) / 2, dense - inv.layers.back().dense_bytes}) {
    RunRequest r;
    r.mode = FfnMode::Predict;
    r.n_ctx = 64;
    r.kv_types_given = false;
    r.device.device = GetParam();
    r.device.vram_budget = budget;
    PlannedRun planned = plan_run(*m, r);
    ASSERT_TRUE(planned.device.split);
    auto dev = make_session_backend(planned, pool);
    SessionOptions alone = planned.session;
    alone.host_backend = nullptr;
    alone.host_layers.clear();
    alone.output_on_host = false;
    CpuBackend cpu(pool);
    {
      Session s(*m, 64, *dev, planned.session);
      s.eval(kPrompt);
      EXPECT_LE(dev->allocated(), budget) << "the budget is a hard limit";
      EXPECT_GT(s.split_device_pairs(), 0u);
    }
    expect_close(logits(*m, *dev, planned.session), logits(*m, cpu, alone), 5e-3,
                 "planned split at " + std::to_string(budget) + " bytes");
  }
}

INSTANTIATE_TEST_SUITE_P(On, CudaSession, ::testing::Values("cuda-emu", "cuda"),
                         [](const auto& info) {
                           return info.param == "cuda" ? std::string("cuda") : "cuda_emu";
                         });

}  // namespace
}  // namespace strata
