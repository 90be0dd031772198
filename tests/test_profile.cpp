// The activation profile: counts match the session's own zero counting, the sidecar round-trips
// and refuses another model, the hot-neuron summary is right on a known distribution.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <span>

#include "core/error.h"
#include "offline/profile.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;
using strata::testing::tiny_model;

TEST(Profile, CountsMatchTheSessionAndRoundTrip) {
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::ReGLU), false);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 31 + 7) % 256);
  ThreadPool pool(2);
  const NeuronProfile p = profile_model(*m, tokens, 40, 0, pool);
  EXPECT_EQ(p.tokens, 100u);
  // The same windows through a plain session: zeros per layer.
  Session s(*m, 40, pool);
  for (size_t start = 0; start < tokens.size(); start += 40) {
    s.reset();
    s.eval(std::span<const int32_t>(tokens).subspan(start,
                                                    std::min<size_t>(40, tokens.size() - start)));
  }
  for (int64_t l = 0; l < m->config.n_layer; ++l) {
    const uint64_t fired = std::accumulate(p.counts[l].begin(), p.counts[l].end(), uint64_t{0});
    EXPECT_EQ(fired, s.ffn_activations_per_layer() - s.ffn_zeros()[l]) << "layer " << l;
  }
  const std::string path = temp_file("profile.gguf");
  write_profile(p, path);
  const NeuronProfile back = read_profile(path, model_hash(*m));
  EXPECT_EQ(back.counts, p.counts);
  EXPECT_EQ(back.tokens, p.tokens);
  const auto other = Model::load(tiny_model(DType::F16, FfnActivation::ReGLU), false);
  EXPECT_THROW(read_profile(path, model_hash(*other)), Error);
  EXPECT_THROW(read_profile(tiny_model(DType::F32, FfnActivation::ReGLU)), Error);  // not a profile
  EXPECT_NE(profile_report_html(p, "tiny").find("<polyline"), std::string::npos);
}

// Issue 29: a sidecar with NaN in window_reuse aborted run, serve, bench and plan inside GLPK;
// 5 and inf were accepted. Every number the solver gets from a profile is range-checked.
TEST(Profile, OutOfRangeNumbersAreRefusedWhenRead) {
  NeuronProfile good;
  good.model_hash = "h";
  good.tokens = 10;
  good.counts = {{1, 2, 10}, {0, 0, 3}};
  good.window_reuse = {0.5, 1.0};
  const std::string path = temp_file("bad_profile.gguf");
  write_profile(good, path);
  EXPECT_NO_THROW(read_profile(path, "h"));
  auto refused = [&](const std::function<void(NeuronProfile&)>& spoil, const char* needle) {
    NeuronProfile p = good;
    spoil(p);
    write_profile(p, path);
    try {
      read_profile(path, "h");
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused([](NeuronProfile& p) { p.window_reuse[1] = std::nan(""); }, "window_reuse of layer 1");
  refused([](NeuronProfile& p) { p.window_reuse[0] = 5; }, "0..1");
  refused([](NeuronProfile& p) { p.window_reuse[0] = INFINITY; }, "0..1");
  refused([](NeuronProfile& p) { p.window_reuse[0] = -0.1; }, "0..1");
  refused([](NeuronProfile& p) { p.tokens = 0; }, "strata.profile.tokens");
  refused([](NeuronProfile& p) { p.counts[1][2] = 11; }, "fired 11 times in 10");
  refused([](NeuronProfile& p) { p.ffn_mode = "gate-first"; }, "strata.profile.ffn_mode");
}

// A predict-mode profile counts what a predict-mode run reads: per layer its counts sum to the
// (token, neuron) pairs the session selected, tokens one at a time and in prompt batches
// alike; it is not the dense profile (the predictor selects more, and others, than fire), and
// its mode survives the file.
TEST(Profile, PredictModeCountsThePredictorsSelections) {
  const auto m = Model::load(
      strata::testing::sparse_tiny_model(DType::F32, FfnActivation::ReGLU, 3), false);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 60; ++i) tokens.push_back((i * 37 + 5) % 256);
  ThreadPool pool(2);
  const NeuronProfile p = profile_model(*m, tokens, 30, 0, pool, {}, FfnMode::Predict);
  EXPECT_EQ(p.ffn_mode, "predict");
  SessionOptions o{FfnMode::Predict};
  Session s(*m, 30, pool, o);
  for (size_t start = 0; start < tokens.size(); start += 30) {
    s.reset();
    s.eval(std::span<const int32_t>(tokens).subspan(start, 30));
  }
  const NeuronProfile dense = profile_model(*m, tokens, 30, 0, pool);
  EXPECT_EQ(dense.ffn_mode, "dense");
  for (int64_t l = 0; l < m->config.n_layer; ++l) {
    const uint64_t selected = std::accumulate(p.counts[l].begin(), p.counts[l].end(), uint64_t{0});
    EXPECT_EQ(selected, s.ffn_stats()[static_cast<size_t>(l)].computed) << "layer " << l;
    EXPECT_NE(p.counts[l], dense.counts[l]) << "layer " << l;
  }
  const std::string path = temp_file("predict_profile.gguf");
  write_profile(p, path);
  EXPECT_EQ(read_profile(path, model_hash(*m)).ffn_mode, "predict");
  Session plain(*m, 30, pool);
  EXPECT_THROW(plain.set_selection_observer([](int64_t, int64_t, int64_t, const uint8_t*) {}),
               Error)
      << "a dense session selects nothing";
}

TEST(Profile, HotNeuronSummaryOnAKnownDistribution) {
  // 10 neurons: one fires 90 times, nine fire 10 times each; 100 tokens.
  std::vector<uint32_t> counts(10, 10);
  counts[3] = 90;
  const LayerProfileSummary s = summarize_layer(counts, 100);
  EXPECT_NEAR(s.sparsity, 1.0 - 180.0 / 1000.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.neurons_for_50, 0.1);  // the hot neuron alone covers 90/180
  EXPECT_DOUBLE_EQ(s.neurons_for_80, 0.7);  // 144 needed: 90 + 5 * 10 = 140 < 144 <= 150
  EXPECT_DOUBLE_EQ(s.neurons_for_95, 1.0);  // 171 needs all: 90 + 8 * 10 = 170
  EXPECT_DOUBLE_EQ(s.curve.front(), 0.0);
  EXPECT_DOUBLE_EQ(s.curve.back(), 1.0);
}

TEST(Profile, WindowReuseCountsNeuronsActiveInTheLastTokens) {
  // The same token over and over: every activation after the first token is a reuse.
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::ReGLU), false);
  ThreadPool pool(2);
  const NeuronProfile same = profile_model(*m, std::vector<int32_t>(30, 5), 30, 0, pool);
  for (int64_t l = 0; l < m->config.n_layer; ++l) {
    const uint64_t fired = std::accumulate(same.counts[l].begin(), same.counts[l].end(), 0ull);
    // Position changes the attention output slightly; the first token's neurons are never reuses.
    EXPECT_GT(same.window_reuse.at(l), 0.9);
    EXPECT_LT(same.window_reuse.at(l), 1.0 - 0.5 / static_cast<double>(fired));
  }
  const std::string path = temp_file("profile_reuse.gguf");
  write_profile(same, path);
  EXPECT_EQ(read_profile(path).window_reuse.size(), same.window_reuse.size());
  EXPECT_NEAR(read_profile(path).window_reuse[0], same.window_reuse[0], 1e-6);
}

// strata synth --context: neighbouring tokens share neurons (windowing has something to reuse)
// while the density stays at the target.
TEST(Profile, SynthContextMakesNeighboursShareNeuronsAtTheSameDensity) {
  auto profile = [](double context) {
    SynthSpec s = synth_preset("tiny");
    s.type = DType::F32;
    s.shape.ffn = FfnActivation::ReGLU;
    s.shape.n_embd = 256, s.shape.n_head = 4, s.shape.n_head_kv = 2;
    s.shape.n_ff = 512, s.shape.n_layer = 2, s.shape.n_vocab = 512;
    s.density = 0.1;
    s.predictor_rank = 32;
    s.context = context;
    const std::string path = temp_file(fmt::format("context_{}.gguf", context));
    write_synthetic_model(s, path);
    const auto m = Model::load(path, false);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 256; ++i) tokens.push_back((i * 193 + 11) % 512);
    ThreadPool pool(2);
    return profile_model(*m, tokens, 256, 0, pool);
  };
  const NeuronProfile plain = profile(0.0), context = profile(0.6);
  for (size_t l = 0; l < plain.counts.size(); ++l) {
    const double density = 1.0 - summarize_layer(context.counts[l], context.tokens).sparsity;
    EXPECT_NEAR(density, 0.1, 0.03) << "layer " << l;
    EXPECT_GT(context.window_reuse[l], plain.window_reuse[l] + 0.1) << "layer " << l;
  }
  EXPECT_THROW(
      {
        SynthSpec s = synth_preset("tiny");
        s.context = 0.5;  // without --sparsity
        write_synthetic_model(s, temp_file("context_dense.gguf"));
      },
      Error);
}

}  // namespace
}  // namespace strata
