// Mixture-of-experts layers (Mixtral's): both tensor layouts, batches against token-by-token
// decoding, the counts, and what strata refuses to do with them yet. The logits against the
// PyTorch reference: tools/reference/check_logits.py (ctest reference_logits_pytorch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "model/expert_summary.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::tiny_moe_model;

std::vector<float> decode_each(const Model& m, const std::vector<int32_t>& tokens, int threads) {
  ThreadPool pool(threads);
  Session s(m, 128, pool);
  std::vector<float> all;
  for (int32_t t : tokens) {
    const auto l = s.eval(t);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

std::vector<int32_t> some_tokens(int count) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back((i * 53 + 7) % 256);
  return tokens;
}

// The writer draws the same random rows in the same order for both layouts, so the two files
// hold the same experts: the same logits bit for bit, whatever the thread count.
TEST(Mixture, StackedAndPerExpertTensorsGiveTheSameLogits) {
  const auto stacked = Model::load(tiny_moe_model(DType::F32, true), false);
  const auto split = Model::load(tiny_moe_model(DType::F32, false), false);
  ASSERT_TRUE(stacked->config.moe());
  EXPECT_EQ(stacked->config.n_expert, 4);
  EXPECT_EQ(stacked->config.n_expert_used, 2);
  EXPECT_EQ(stacked->weights.layers[0].experts.size(), 4u);
  EXPECT_EQ(stacked->weights.layers[0].ffn_up.data, nullptr);
  const std::vector<int32_t> tokens = some_tokens(9);
  const std::vector<float> a = decode_each(*stacked, tokens, 1);
  EXPECT_EQ(a, decode_each(*split, tokens, 1));
  EXPECT_EQ(a, decode_each(*stacked, tokens, 2));
  EXPECT_EQ(a, decode_each(*stacked, tokens, 3));
}

// A prompt batch runs each chosen expert once over the rows of the tokens that chose it; the
// logits agree with one token at a time within rounding (the batch's products are tile
// kernels), and each token computes k experts' neurons.
TEST(Mixture, BatchesMatchTokenByTokenAndCountKExpertsPerToken) {
  const std::vector<int32_t> tokens = some_tokens(Session::kMaxBatch + 9);
  for (DType type : {DType::F32, DType::Q8_0}) {
    for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}}) {
      const auto m = Model::load(tiny_moe_model(type, true, 4, k), false);
      const std::vector<float> one = decode_each(*m, tokens, 2);
      ThreadPool pool(2);
      Session batch(*m, 128, pool);
      const auto all = batch.eval(tokens, /*all_logits=*/true);
      ASSERT_EQ(all.size(), one.size());
      float scale = 0;
      for (float v : one) scale = std::max(scale, std::fabs(v));
      const int64_t v = m->config.n_vocab;
      for (size_t t = 0; t < tokens.size(); ++t) {
        float diff = 0;
        for (int64_t i = 0; i < v; ++i)
          diff = std::max(diff, std::fabs(one[t * v + i] - all[t * v + i]));
        // Q8_0: an activation's 8-bit rounding may flip; a router near a tie may choose
        // another expert for one token (then its logits differ more; none seen here).
        ASSERT_LT(diff, (type == DType::Q8_0 ? 0.05f : 1e-4f) * scale)
            << dtype_name(type) << " k " << k << " token " << t;
      }
      const uint64_t per_layer = tokens.size() * static_cast<uint64_t>(m->config.n_ff * k);
      EXPECT_EQ(batch.ffn_activations_per_layer(), per_layer);
      for (const FfnLayerStats& s : batch.ffn_stats()) EXPECT_EQ(s.computed, per_layer);
    }
  }
}

// strata info's summary, from the file alone: the counts, the layout, the bytes by kind, and a
// token's share of the experts; the same for both layouts of the same experts.
TEST(Mixture, TheFileSummaryCountsExpertsAndTheirBytes) {
  ExpertSummary both[2];
  for (const bool stacked : {true, false}) {
    const auto f = GgufFile::open(tiny_moe_model(DType::F32, stacked, 4, 2));
    const ExpertSummary e = summarize_experts(*f);
    EXPECT_EQ(e.n_expert, 4);
    EXPECT_EQ(e.n_expert_used, 2);
    EXPECT_EQ(e.stacked, stacked);
    const int64_t layers = f->get_int("llama.block_count");
    EXPECT_EQ(e.moe_layers, layers);
    // F32: router n_embd x n_expert; each expert gate, up, down of n_embd x n_ff.
    const uint64_t d = 64, ff = 192;
    EXPECT_EQ(e.router_bytes, static_cast<uint64_t>(layers) * d * 4 * 4);
    EXPECT_EQ(e.expert_bytes, static_cast<uint64_t>(layers) * 4 * 3 * d * ff * 4);
    EXPECT_EQ(e.active_expert_bytes(), e.expert_bytes / 2);
    EXPECT_EQ(e.shared_bytes, 0u);
    both[stacked ? 0 : 1] = e;
  }
  EXPECT_EQ(both[0].expert_bytes, both[1].expert_bytes);
  // Qwen2-MoE's shared expert (F32, n_ff_shared = n_ff = 192) and its gate, apart.
  const ExpertSummary q =
      summarize_experts(*GgufFile::open(strata::testing::tiny_arch_model("qwen2moe")));
  EXPECT_EQ(q.n_expert, 8);
  EXPECT_EQ(q.shared_bytes, static_cast<uint64_t>(q.moe_layers) * (3 * 64 * 192 + 64) * 4);
  EXPECT_EQ(summarize_experts(*GgufFile::open(strata::testing::tiny_arch_model("llama"))).n_expert,
            0);
}

std::vector<float> gate_first_each(const std::string& path, const std::vector<int32_t>& tokens,
                                   std::vector<FfnLayerStats>* stats = nullptr) {
  const auto m = Model::load(path, false);
  m->ensure_down_t();
  ThreadPool pool(2);
  SessionOptions o;
  o.ffn = FfnMode::GateFirst;
  Session s(*m, 128, pool, o);
  std::vector<float> all;
  for (int32_t t : tokens) {
    const auto l = s.eval(t);
    all.insert(all.end(), l.begin(), l.end());
  }
  if (stats != nullptr) *stats = s.ffn_stats();
  return all;
}

float max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(b[i]));
  return diff / scale;
}

// Gate-first on a mixture of ReLU-family experts: the router picks the experts, each chosen
// expert's deciding rows pick its neurons, and only those neurons' other rows are read. Exact:
// the dense mixture's logits within rounding (another order of additions), and fewer neurons
// than the k chosen experts hold.
TEST(Mixture, GateFirstComputesTheFiringNeuronsOfTheChosenExpertsOnly) {
  const std::vector<int32_t> tokens = some_tokens(12);
  for (const FfnActivation ffn : {FfnActivation::DReLU, FfnActivation::ReLU, FfnActivation::ReGLU})
    for (const int64_t k : {int64_t{1}, int64_t{2}}) {
      const std::string path = tiny_moe_model(DType::F32, true, 4, k, ffn);
      const auto dense_model = Model::load(path, false);
      const std::vector<float> dense = decode_each(*dense_model, tokens, 2);
      std::vector<FfnLayerStats> stats;
      const std::vector<float> sparse = gate_first_each(path, tokens, &stats);
      ASSERT_EQ(sparse.size(), dense.size());
      EXPECT_LT(max_relative_difference(sparse, dense), 1e-5f)
          << ffn_activation_name(ffn) << " k " << k;
      // The chosen experts' neurons are n_ff * k a token; their firing share is computed.
      const uint64_t chosen = tokens.size() * static_cast<uint64_t>(dense_model->config.n_ff * k);
      for (const FfnLayerStats& st : stats) {
        EXPECT_GT(st.computed, 0u);
        EXPECT_LT(st.computed, chosen * 3 / 4) << ffn_activation_name(ffn);
      }
    }
}

// A prompt batch through the sparse mixture: each token masked to its own experts and weighed
// by its own routing, the same logits as one token at a time within rounding.
TEST(Mixture, GateFirstBatchesMatchTokenByToken) {
  const std::string path = tiny_moe_model(DType::F32, true, 4, 2, FfnActivation::DReLU);
  const std::vector<int32_t> tokens = some_tokens(Session::kMaxBatch + 5);
  const std::vector<float> one = gate_first_each(path, tokens);
  const auto m = Model::load(path, false);
  m->ensure_down_t();
  ThreadPool pool(2);
  SessionOptions o;
  o.ffn = FfnMode::GateFirst;
  Session batch(*m, 128, pool, o);
  const auto all = batch.eval(tokens, /*all_logits=*/true);
  ASSERT_EQ(all.size(), one.size());
  EXPECT_LT(max_relative_difference(std::vector<float>(all.begin(), all.end()), one), 1e-4f);
}

// The sparse modes read a layer's experts as one matrix: a view over the stacked tensor, or over
// per-expert tensors that lie one after another (as strata synth writes them); none where they
// do not (an older converter's files, expert by expert), which gate-first refuses by name.
TEST(Mixture, ExpertsAreOneMatrixWhereTheirRowsAreOneRun) {
  std::vector<uint8_t> memory(4 * 3 * 64);
  auto expert = [&](size_t at) {
    ExpertMatrices x;
    x.up = MatrixView{DType::F32, memory.data() + at, 16, 3, 64};
    return x;
  };
  const std::vector<ExpertMatrices> run{expert(0), expert(192), expert(384)};
  const MatrixView all = expert_neuron_rows(run, &ExpertMatrices::up);
  EXPECT_EQ(all.data, memory.data());
  EXPECT_EQ(all.rows, 9);
  EXPECT_EQ(all.row_bytes, 64u);
  const std::vector<ExpertMatrices> gap{expert(0), expert(256), expert(512)};
  EXPECT_EQ(expert_neuron_rows(gap, &ExpertMatrices::up).data, nullptr);
  const std::vector<ExpertMatrices> swapped{expert(192), expert(0)};
  EXPECT_EQ(expert_neuron_rows(swapped, &ExpertMatrices::up).data, nullptr);
  // strata synth's per-expert tensors lie in order: gate-first reads them as the stacked file.
  const std::vector<int32_t> tokens = some_tokens(6);
  EXPECT_EQ(gate_first_each(tiny_moe_model(DType::F32, false, 4, 2, FfnActivation::DReLU), tokens),
            gate_first_each(tiny_moe_model(DType::F32, true, 4, 2, FfnActivation::DReLU), tokens));
}

// A mixture of dReLU experts sparse by construction, with predictors for every expert's neurons
// (strata synth --arch mixtral --ffn drelu --sparsity 0.1): 4 experts of 256 neurons, 2 a token.
std::string sparse_moe_model() {
  return strata::testing::sparse_moe_tiny_model(DType::F32);
}

std::vector<float> run_mode(const Model& m, FfnMode mode, const std::vector<int32_t>& tokens,
                            bool one_at_a_time, std::vector<FfnLayerStats>* stats = nullptr) {
  ThreadPool pool(2);
  SessionOptions o;
  o.ffn = mode;
  Session s(m, 128, pool, o);
  std::vector<float> all;
  if (one_at_a_time) {
    for (int32_t t : tokens) {
      const auto l = s.eval(t);
      all.insert(all.end(), l.begin(), l.end());
    }
  } else {
    const auto l = s.eval(tokens, /*all_logits=*/true);
    all.assign(l.begin(), l.end());
  }
  if (stats != nullptr) *stats = s.ffn_stats();
  return all;
}

// Predict mode on a mixture: the router picks the experts, the predictor the chosen experts'
// neurons (its fc2 rows of the chosen experts only). Close to the exact modes; about the
// model's density of the chosen experts' neurons computed (a few more than gate-first, whose
// dense gate rows find exactly the firing ones, but without reading those rows); a prompt
// batch as one token at a time.
TEST(Mixture, PredictModePicksTheChosenExpertsNeurons) {
  const auto m = Model::load(sparse_moe_model(), false);
  ASSERT_TRUE(m->weights.has_predictors);
  EXPECT_EQ(m->weights.layers[0].predictor.fc2.rows, 4 * 256);
  m->ensure_down_t();
  const std::vector<int32_t> tokens = some_tokens(20);
  const std::vector<float> dense = run_mode(*m, FfnMode::Dense, tokens, true);
  std::vector<FfnLayerStats> exact, predicted;
  const std::vector<float> gate_first = run_mode(*m, FfnMode::GateFirst, tokens, true, &exact);
  const std::vector<float> predict = run_mode(*m, FfnMode::Predict, tokens, true, &predicted);
  EXPECT_LT(max_relative_difference(gate_first, dense), 1e-5f);
  const float miss = max_relative_difference(predict, dense);
  RecordProperty("predict_vs_dense", std::to_string(miss));
  EXPECT_LT(miss, 0.05f);
  const uint64_t chosen = tokens.size() * static_cast<uint64_t>(256 * 2);
  for (size_t l = 0; l < predicted.size(); ++l) {
    EXPECT_GE(predicted[l].computed, exact[l].computed * 9 / 10) << l;  // recall near 1
    EXPECT_LT(predicted[l].computed, chosen / 4) << l;  // density 0.1 of the chosen experts
  }
  const std::vector<float> batch = run_mode(*m, FfnMode::Predict, tokens, false);
  EXPECT_LT(max_relative_difference(batch, predict), 1e-4f);
}

// The flash tier holds a mixture's every expert neuron in a bundle: the bundled file gives
// exactly the logits of the same file in RAM (the same neurons, the same order of additions),
// with caches that hold every neuron, or so few that neurons are evicted every token and a
// token's neurons take several passes; split reads and a prompt batch too.
TEST(Mixture, FlashTierBundlesEveryExpertsNeurons) {
  for (const DType type : {DType::F32, DType::Q4_0}) {
    SynthSpec s = synth_preset("tiny");
    s.shape.n_embd = 256, s.shape.n_ff = 256, s.shape.n_layer = 2;
    s.shape.ffn = FfnActivation::DReLU;
    s.shape.n_expert = 4, s.shape.n_expert_used = 2;
    s.type = type, s.density = 0.1, s.predictor_rank = 32, s.seed = 8;
    const std::string path =
        strata::testing::temp_file(std::string("moe_flash_") + dtype_name(type) + ".gguf");
    write_synthetic_model(s, path);
    const auto ram = Model::load(path, false);
    ram->ensure_down_t();
    const auto flash = Model::load(strata::testing::bundled_model(path), false);
    ASSERT_TRUE(flash->weights.bundled);
    EXPECT_EQ(flash->weights.layers[0].experts.size(), 0u);  // the experts live in bundles
    EXPECT_NE(flash->weights.layers[0].ffn_gate_inp.data, nullptr);
    const std::vector<int32_t> tokens = some_tokens(12);
    const std::vector<float> expected = run_mode(*ram, FfnMode::Predict, tokens, true);
    for (const int64_t slots : {int64_t{0}, int64_t{200}, int64_t{60}})
      for (const bool split : {false, true}) {
        ThreadPool pool(2);
        SessionOptions o{FfnMode::Predict};
        o.cache_neurons = slots, o.flash.window = 2, o.flash.split_reads = split, o.flash.lookahead = true;
        Session session(*flash, 128, pool, o);
        std::vector<float> got;
        for (int32_t t : tokens) {
          const auto l = session.eval(t);
          got.insert(got.end(), l.begin(), l.end());
        }
        if (slots == 60) {  // passes: within rounding of RAM's single pass
          EXPECT_LT(max_relative_difference(got, expected), 1e-5f) << dtype_name(type);
        } else {
          EXPECT_EQ(got, expected) << dtype_name(type) << " slots " << slots << " split " << split;
        }
        EXPECT_GT(session.flash_stats().bytes_read, 0u);
      }
    EXPECT_EQ(run_mode(*flash, FfnMode::Predict, tokens, false),
              run_mode(*ram, FfnMode::Predict, tokens, false))
        << "batched";
  }
}

TEST(Mixture, WhatTheSparseModesCannotDoIsRefusedByName) {
  ThreadPool pool(1);
  auto expect_refused = [&](const std::string& path, FfnMode mode, const std::string& needle) {
    const auto m = Model::load(path, false);
    m->ensure_down_t();
    SessionOptions o;
    o.ffn = mode;
    try {
      Session s(*m, 64, pool, o);
      FAIL() << needle << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::string drelu = tiny_moe_model(DType::F32, true, 4, 2, FfnActivation::DReLU);
  expect_refused(drelu, FfnMode::Predict, "lacks");
  expect_refused(tiny_moe_model(DType::F32, true, 4, 2), FfnMode::GateFirst,
                 "needs a ReLU-family FFN");
  {
    const auto m = Model::load(sparse_moe_model(), false);
    m->ensure_down_t();
    SessionOptions o;
    o.ffn = FfnMode::Predict;
    o.check_predictor = true;
    EXPECT_THROW(Session(*m, 64, pool, o), Error);
  }
  // A shared expert (Qwen2-MoE) runs dense only, and is not bundled: both say so.
  const auto shared = Model::load(strata::testing::tiny_arch_model("qwen2moe"), false);
  EXPECT_GT(shared->config.n_ff_shared, 0);
  expect_refused(strata::testing::tiny_arch_model("qwen2moe"), FfnMode::GateFirst,
                 "shared expert");
  try {
    write_bundled_model(*shared, strata::testing::temp_file("shared.bundle.gguf"));
    FAIL() << "a shared expert was bundled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared expert"), std::string::npos) << e.what();
  }
}

// Qwen2-MoE's mixture: each token's k experts weighed by the softmax as it is (not
// renormalized) plus the shared expert weighed by the sigmoid of its gate, every token. A
// prompt batch equals one token at a time; the shared expert's activations count with the
// routed ones; the logits against PyTorch: check_logits.py (qwen2moe).
TEST(Mixture, ASharedExpertJoinsEveryTokensMixture) {
  const auto m = Model::load(strata::testing::tiny_arch_model("qwen2moe"), false);
  ASSERT_NE(m->weights.layers[0].shared_gate.data, nullptr);
  const std::vector<int32_t> tokens = some_tokens(12);
  const std::vector<float> one = decode_each(*m, tokens, 2);
  ThreadPool pool(2);
  Session batch(*m, 128, pool);
  const auto all = batch.eval(tokens, /*all_logits=*/true);
  float scale = 0, diff = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    scale = std::max(scale, std::fabs(one[i]));
    diff = std::max(diff, std::fabs(one[i] - all[i]));
  }
  EXPECT_LT(diff, 1e-4f * scale);
  const ModelConfig& c = m->config;
  EXPECT_EQ(batch.ffn_activations_per_layer(),
            tokens.size() * static_cast<uint64_t>(c.n_ff * c.n_expert_used + c.n_ff_shared));
  EXPECT_EQ(batch.ffn_stats()[0].computed, batch.ffn_activations_per_layer());
}

// Profiles and predictor training observe a mixture as the sparse modes see it: activations
// [n][n_expert * n_ff], a token's unchosen experts all zero, its chosen experts' neurons as the
// dense mixture computes them; a batch observes what its tokens one at a time would.
TEST(Mixture, ObserversSeeEveryExpertsNeuronsWithTheUnchosenZero) {
  const auto m = Model::load(tiny_moe_model(DType::F32, true, 4, 2, FfnActivation::DReLU), false);
  const int64_t ff = m->config.n_ff, neurons = m->config.ffn_neurons();
  ASSERT_EQ(neurons, 4 * ff);
  const std::vector<int32_t> tokens = some_tokens(10);
  auto observe = [&](bool batch) {
    ThreadPool pool(2);
    Session s(*m, 64, pool);
    std::vector<std::vector<float>> seen(static_cast<size_t>(m->config.n_layer));
    s.set_ffn_observer([&](int64_t l, int64_t n, const float*, const float* h) {
      seen[static_cast<size_t>(l)].insert(seen[static_cast<size_t>(l)].end(), h, h + n * neurons);
    });
    if (batch)
      s.eval(tokens);
    else
      for (int32_t t : tokens) s.eval(t);
    return seen;
  };
  const auto one = observe(false), all = observe(true);
  for (size_t l = 0; l < one.size(); ++l) {
    ASSERT_EQ(one[l].size(), tokens.size() * static_cast<size_t>(neurons));
    for (size_t b = 0; b < tokens.size(); ++b) {
      int experts_active = 0;
      for (int64_t e = 0; e < 4; ++e) {
        bool any = false;
        for (int64_t j = 0; j < ff; ++j) any |= one[l][b * neurons + e * ff + j] != 0.0f;
        experts_active += any;
      }
      EXPECT_GE(experts_active, 1) << "layer " << l << " token " << b;
      EXPECT_LE(experts_active, 2) << "layer " << l << " token " << b;
      for (int64_t i = 0; i < neurons; ++i) {
        const float a = one[l][b * neurons + i], c = all[l][b * neurons + i];
        ASSERT_EQ(a == 0.0f, c == 0.0f) << "layer " << l << " token " << b << " neuron " << i;
        ASSERT_NEAR(a, c, 1e-4f * (1.0f + std::fabs(a)));
      }
    }
  }
}

}  // namespace
}  // namespace strata
