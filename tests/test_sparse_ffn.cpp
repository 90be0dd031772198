// The sparse FFN modes end to end: gate-first against dense, predict with a select-everything
// threshold against dense, thread-count and batching independence, PowerInfer files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "core/error.h"
#include "model/arch/architecture.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;
using strata::testing::tiny_model;

const std::vector<int32_t> kSparseTokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33};

std::string sparse_model(DType type, FfnActivation ffn, bool powerinfer = false,
                         bool keep_down = false) {
  return strata::testing::sparse_tiny_model(type, ffn, 5, powerinfer, keep_down);
}

// Logits of every position, token by token.
std::vector<std::vector<float>> run_sparse(const Model& m, SessionOptions o, int threads = 2) {
  ThreadPool pool(threads);
  Session s(m, 64, pool, o);
  std::vector<std::vector<float>> out;
  for (int32_t t : kSparseTokens) {
    auto l = s.eval(t);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

void expect_close(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    float scale = 0;
    for (float v : a[i]) scale = std::max(scale, std::fabs(v));
    for (size_t j = 0; j < a[i].size(); ++j)
      ASSERT_NEAR(a[i][j], b[i][j], tol * scale) << what << " position " << i;
    EXPECT_EQ(std::max_element(a[i].begin(), a[i].end()) - a[i].begin(),
              std::max_element(b[i].begin(), b[i].end()) - b[i].begin())
        << what << " greedy token at " << i;
  }
}

const DType kSparseTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

TEST(SparseFfn, GateFirstMatchesDenseAfterTransposingDownAtLoad) {
  // Same neurons, down projection summed in a different order (axpy over ffn_down_t vs dot
  // products over ffn_down): equal up to float rounding. Float types only: quantized ffn_down
  // is re-quantized when transposed, which changes the weights themselves.
  for (FfnActivation ffn : {FfnActivation::ReGLU, FfnActivation::DReLU, FfnActivation::ReLU})
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
      const auto m = Model::load(tiny_model(type, ffn), false);
      const auto dense = run_sparse(*m, {});
      m->ensure_down_t();
      expect_close(dense, run_sparse(*m, {FfnMode::GateFirst}), 1e-4f,
                   std::string(ffn_activation_name(ffn)) + " " + dtype_name(type));
    }
}

TEST(SparseFfn, GateFirstIsBitIdenticalToDenseOnFilesWithDownT) {
  // With ffn_down_t stored, dense mode sums every neuron through the same axpy, which skips
  // exact zeros: gate-first computes the same sums, for every type.
  for (FfnActivation ffn : {FfnActivation::ReGLU, FfnActivation::DReLU, FfnActivation::ReLU})
    for (DType type : kSparseTypes) {
      const auto m = Model::load(sparse_model(type, ffn), false);
      EXPECT_EQ(run_sparse(*m, {}), run_sparse(*m, {FfnMode::GateFirst}))
          << ffn_activation_name(ffn) << " " << dtype_name(type);
    }
}

TEST(SparseFfn, SynthKeepDownWritesTheSameMatrixInBothLayouts) {
  // Dense reads ffn_down (dot products), gate-first ffn_down_t (axpy): equal up to rounding.
  const auto m = Model::load(sparse_model(DType::F32, FfnActivation::ReGLU, false, true), false);
  ASSERT_NE(m->weights.layers[0].ffn_down.data, nullptr);
  ASSERT_NE(m->weights.layers[0].ffn_down_t.data, nullptr);
  expect_close(run_sparse(*m, {}), run_sparse(*m, {FfnMode::GateFirst}), 1e-5f, "keep-down");
}

TEST(SparseFfn, GateFirstGreedyTokensEqualDenseOnTheShippedModel) {
  const auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  auto greedy = [&](SessionOptions o) {
    ThreadPool pool(2);
    Session s(*m, 128, pool, o);
    std::vector<int32_t> out = m->tokenizer->encode("And God said", true);
    auto logits = s.eval(out);
    for (int i = 0; i < 64; ++i) {
      const int32_t next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      logits = s.eval(next);
    }
    return out;
  };
  const auto dense = greedy({});
  m->ensure_down_t();
  EXPECT_EQ(dense, greedy({FfnMode::GateFirst}));
}

TEST(SparseFfn, PredictSelectingEveryNeuronMatchesDense) {
  for (DType type : kSparseTypes) {
    const auto m = Model::load(sparse_model(type, FfnActivation::ReGLU), false);
    ASSERT_TRUE(m->weights.has_predictors && m->weights.has_down_t);
    ASSERT_TRUE(m->weights.layers[0].ffn_down.data == nullptr);  // only ffn_down_t stored
    const auto dense = run_sparse(*m, {});
    for (auto& l : m->weights.layers) l.predictor.threshold = -1e30f;
    const auto predict = run_sparse(*m, {FfnMode::Predict});
    expect_close(dense, predict, 1e-5f, dtype_name(type));
  }
}

TEST(SparseFfn, PredictorOfASyntheticModelFindsTheActiveNeurons) {
  const auto m = Model::load(sparse_model(DType::F16, FfnActivation::ReGLU), false);
  ThreadPool pool(2);
  Session s(*m, 64, pool, {FfnMode::Predict, /*check_predictor=*/true});
  s.eval(kSparseTokens);
  for (const FfnLayerStats& st : s.ffn_stats()) {
    ASSERT_GT(st.truly_active, 0u);
    const double recall = double(st.predicted_and_active) / st.truly_active;
    EXPECT_GT(recall, 0.95);
    EXPECT_LT(st.computed, kSparseTokens.size() * 256 * 6 / 10);  // far from dense
    EXPECT_EQ(st.computed, st.predicted);
  }
}

TEST(SparseFfn, SparseModesIdenticalAcrossThreadCountsAndBatching) {
  for (DType type : {DType::F32, DType::Q4_0}) {
    const auto m = Model::load(sparse_model(type, FfnActivation::ReGLU), false);
    for (FfnMode mode : {FfnMode::Predict, FfnMode::GateFirst}) {
      const auto one = run_sparse(*m, {mode}, 1);
      EXPECT_EQ(one, run_sparse(*m, {mode}, 2)) << ffn_mode_name(mode);
      EXPECT_EQ(one, run_sparse(*m, {mode}, 3)) << ffn_mode_name(mode);
      ThreadPool pool(2);
      Session batch(*m, 64, pool, {mode});
      const auto all = batch.eval(kSparseTokens, /*all_logits=*/true);
      const size_t v = all.size() / kSparseTokens.size();
      std::vector<std::vector<float>> batched;
      for (size_t i = 0; i < kSparseTokens.size(); ++i)
        batched.emplace_back(all.begin() + i * v, all.begin() + (i + 1) * v);
      // Batched products use tile kernels (register tiles for floats, AMX for quantized types)
      // whose sums are split differently from the single-token dot kernels': equal within
      // rounding (Session.BatchedEvaluation... says more).
      expect_close(one, batched, 1e-4f, ffn_mode_name(mode));
    }
  }
}

TEST(SparseFfn, PowerInferFileRunsInPredictModeLikeTheSameStrataFile) {
  for (FfnActivation ffn : {FfnActivation::ReGLU, FfnActivation::DReLU}) {
    const auto pwri = Model::load(sparse_model(DType::F16, ffn, true), false);
    ASSERT_TRUE(pwri->file->is_powerinfer());
    EXPECT_EQ(pwri->file->find(kFfnActivationKey), nullptr);  // the variant comes from PWRI/arch
    EXPECT_EQ(pwri->config.ffn, ffn);
    EXPECT_EQ(pwri->config.architecture, ffn == FfnActivation::DReLU ? "bamboo" : "llama");
    ASSERT_TRUE(pwri->weights.has_predictors);
    const auto ours = Model::load(sparse_model(DType::F16, ffn, false), false);
    EXPECT_EQ(pwri->weights.layers[1].predictor.threshold,
              ours->weights.layers[1].predictor.threshold);
    EXPECT_EQ(run_sparse(*pwri, {FfnMode::Predict}), run_sparse(*ours, {FfnMode::Predict}));
  }
}

// A plain-ReLU architecture's model sparse by construction (Falcon: parallel, one norm or two;
// OPT: learned positions, biases, tied head), in strata's layout or PowerInfer's.
std::string sparse_architecture_model(const std::string& arch, int64_t kv_heads, bool powerinfer) {
  const std::string path = temp_file("sparse_" + arch + "_kv" + std::to_string(kv_heads) +
                                     (powerinfer ? "_pwri" : "") + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = arch;
  s.shape.arch = find_architecture(arch);
  s.shape.ffn = FfnActivation::ReLU;
  s.shape.n_ff = 256;
  s.shape.n_layer = 3;
  s.shape.n_head_kv = kv_heads;
  s.type = DType::F16;
  s.density = 0.2;
  s.predictor_rank = 32;
  s.tied_output = arch == "opt";
  s.powerinfer_layout = powerinfer;
  write_synthetic_model(s, path);
  return path;
}

TEST(SparseFfn, SyntheticFalconAndOptAreSparseWithPredictorsThatFindTheActiveNeurons) {
  for (auto [arch, kv] : {std::pair{"falcon", 1}, {"falcon", 2}, {"opt", 4}}) {
    const std::string what = std::string(arch) + " kv " + std::to_string(kv);
    const auto m = Model::load(sparse_architecture_model(arch, kv, false), false);
    ASSERT_TRUE(m->weights.has_predictors && m->weights.has_down_t) << what;
    ThreadPool pool(2);
    Session s(*m, 64, pool, {FfnMode::Predict, /*check_predictor=*/true});
    s.eval(kSparseTokens);
    for (const FfnLayerStats& st : s.ffn_stats()) {
      const double density = double(st.truly_active) / double(kSparseTokens.size() * 256);
      EXPECT_NEAR(density, 0.2, 0.08) << what;
      EXPECT_GT(double(st.predicted_and_active) / double(st.truly_active), 0.95) << what;
    }
    // The exact sparse mode (up-first for a plain FFN) equals dense within rounding.
    expect_close(run_sparse(*m, {}), run_sparse(*m, {FfnMode::GateFirst}), 1e-5f, what);
  }
}

TEST(SparseFfn, PowerInferFalconAndOptFilesRunLikeTheSameStrataFiles) {
  for (auto [arch, kv] : {std::pair{"falcon", 1}, {"falcon", 2}, {"opt", 4}}) {
    const auto pwri = Model::load(sparse_architecture_model(arch, kv, true), false);
    ASSERT_TRUE(pwri->file->is_powerinfer());
    EXPECT_EQ(pwri->file->find(kFfnActivationKey), nullptr);
    EXPECT_EQ(pwri->config.ffn, FfnActivation::ReLU);
    // PowerInfer names OPT's down bias after ffn_down_t, and its opt files have no output.
    EXPECT_EQ(pwri->file->find_tensor("blk.0.ffn_down_t.bias") != nullptr,
              std::string(arch) == "opt");
    EXPECT_EQ(pwri->file->find_tensor("output.weight") != nullptr, std::string(arch) != "opt");
    const auto ours = Model::load(sparse_architecture_model(arch, kv, false), false);
    EXPECT_EQ(run_sparse(*pwri, {FfnMode::Predict}), run_sparse(*ours, {FfnMode::Predict})) << arch;
  }
}

TEST(SparseFfn, ModesThatCannotApplyAreClearErrors) {
  ThreadPool pool(1);
  const auto swiglu = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  swiglu->ensure_down_t();
  EXPECT_THROW(Session(*swiglu, 8, pool, {FfnMode::GateFirst}), Error);
  EXPECT_THROW(Session(*swiglu, 8, pool, {FfnMode::Predict}), Error);  // no predictors
  const auto reglu = Model::load(tiny_model(DType::F32, FfnActivation::ReGLU), false);
  EXPECT_THROW(Session(*reglu, 8, pool, {FfnMode::GateFirst}), Error);  // no ffn_down_t yet
  EXPECT_THROW(Session(*reglu, 8, pool, {FfnMode::Dense, true}), Error);
}

}  // namespace
}  // namespace strata
