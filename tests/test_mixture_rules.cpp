// The mixture recipe's per-family rules (model/arch/glm4moe.cpp, model/arch/hparams.cpp): a
// sigmoid router with its correction bias, weights normalized and scaled, an ungated shared
// expert, leading dense layers held as the layer's one always-used expert, multi-token-prediction
// layers accepted unused; llama.cpp v0.5.0's keys and defaults, bad values refused by key, and
// sessions over them (a batch as one token at a time, the trunk alone of a file with nextn
// layers). The logits against llama.cpp and PyTorch: docs/ARCHITECTURES.md "Checks".
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

// A tiny GLM-4.5-like mixture: 3 layers (the first dense), 8 experts of which a token uses 3.
std::string glm_model() {
  const std::string path = strata::testing::temp_file("glm4moe_tiny.gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = "glm4moe";
  s.shape.n_layer = 3;
  s.shape.n_expert = 8;
  s.shape.n_expert_used = 3;
  s.shape.head_dim = 32;
  s.seed = 13;
  write_synthetic_model(s, path);
  return path;
}

std::string glm_load_error(const std::string& path) {
  try {
    Model::load(path, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MixtureRules, Glm4MoeReadsItsRouterRuleAndLayersWithLlamaCppsKeys) {
  const auto m = Model::load(glm_model(), false);
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.expert_gating, ExpertGating::Sigmoid);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.0f);
  EXPECT_EQ(c.n_dense_lead, 1);
  EXPECT_EQ(c.n_ff_shared, c.n_ff);     // one shared expert of an expert's width
  EXPECT_EQ(c.n_ff_dense, 3 * c.n_ff);  // the dense layer as wide as the k chosen
  EXPECT_EQ(c.n_rot, c.head_dim / 2);   // partial RoPE
  EXPECT_FALSE(c.routed(0));
  EXPECT_TRUE(c.routed(1));
  // Layer 0: its dense FFN as the always-used expert, no router, no experts.
  const LayerWeights& dense = m->weights.layers[0];
  EXPECT_TRUE(dense.experts.empty());
  EXPECT_EQ(dense.ffn_gate_inp.data, nullptr);
  EXPECT_EQ(dense.shared_gate.data, nullptr);
  EXPECT_EQ(dense.shared.up.rows, c.n_ff_dense);
  EXPECT_EQ(dense.shared.down.cols, c.n_ff_dense);
  // Layer 1: router, 8 experts, the correction bias, an ungated shared expert.
  const LayerWeights& mixed = m->weights.layers[1];
  EXPECT_EQ(mixed.experts.size(), 8u);
  EXPECT_EQ(mixed.vec(LayerVector::ExpertSelectionBias).size(), 8u);
  EXPECT_EQ(mixed.shared_gate.data, nullptr);
  EXPECT_EQ(mixed.shared.up.rows, c.n_ff);
  // Written keys come back: the scale (0 means 1 in llama.cpp), the norm off, softmax gating.
  const std::string path = glm_model();
  const ModelConfig other = ModelConfig::from_gguf(*GgufFile::open(
      strata::testing::with_keys(path, "glm_keys.gguf",
                                 {{"glm4moe.expert_weights_scale", GgufValue::f32(2.5f)},
                                  {"glm4moe.expert_weights_norm", std::nullopt},
                                  {"glm4moe.expert_gating_func", GgufValue::u32(1)}})));
  EXPECT_FLOAT_EQ(other.expert_weights_scale, 2.5f);
  EXPECT_FALSE(other.expert_weights_norm);  // llama.cpp's default
  EXPECT_EQ(other.expert_gating, ExpertGating::Softmax);
  const ModelConfig unset = ModelConfig::from_gguf(*GgufFile::open(
      strata::testing::with_keys(path, "glm_unset.gguf",
                                 {{"glm4moe.expert_weights_scale", GgufValue::f32(0.0f)},
                                  {"glm4moe.expert_gating_func", std::nullopt}})));
  EXPECT_FLOAT_EQ(unset.expert_weights_scale, 1.0f);
  EXPECT_EQ(unset.expert_gating, ExpertGating::Sigmoid);  // the family's when absent
}

TEST(MixtureRules, Glm4MoeRefusesWhatItCannotRunNamingTheKey) {
  using strata::testing::with_keys;
  const std::string path = glm_model();
  const auto error = [&](const std::string& key, std::optional<GgufValue> value) {
    return glm_load_error(with_keys(path, "glm_bad.gguf", {{key, value}}));
  };
  EXPECT_NE(error("glm4moe.expert_gating_func", GgufValue::u32(4)).find("expert_gating_func is 4"),
            std::string::npos);
  EXPECT_NE(error("glm4moe.leading_dense_block_count", GgufValue::u32(9))
                .find("leading_dense_block_count is 9"),
            std::string::npos);
  EXPECT_NE(
      error("glm4moe.expert_shared_count", std::nullopt).find("lacks glm4moe.expert_shared_count"),
      std::string::npos);
  EXPECT_NE(
      error("glm4moe.nextn_predict_layers", GgufValue::u32(3)).find("nextn_predict_layers is 3"),
      std::string::npos);
  // M-RoPE whose fourth section (position 0 for text) holds rotated pairs: not the plain
  // rotation; sections covering every pair with the token's position are.
  const auto sections = [](std::vector<uint32_t> s) {
    std::vector<GgufValue> items;
    for (uint32_t x : s) items.push_back(GgufValue::u32(x));
    return GgufValue::array(GgufType::U32, std::move(items));
  };
  EXPECT_NE(error("glm4moe.rope.dimension_sections", sections({2, 2, 2, 10})).find("M-RoPE"),
            std::string::npos);
  EXPECT_EQ(error("glm4moe.rope.dimension_sections", sections({4, 4, 0, 0})), "");
  // A mixture layer without its correction bias is refused by the tensor's name.
  const std::string no_bias = strata::testing::temp_file("glm_no_bias.gguf");
  {
    const auto src = GgufFile::open(path);
    GgufWriter w(no_bias);
    for (const auto& [k, v] : src->metadata()) w.set(k, v);
    for (const auto& t : src->tensors())
      if (t.name != "blk.2.exp_probs_b.bias") w.add_tensor(t.name, t.type, t.dims);
    for (const auto& t : src->tensors())
      if (t.name != "blk.2.exp_probs_b.bias") w.write_tensor_data({t.data, t.n_bytes});
    w.finish();
  }
  EXPECT_NE(glm_load_error(no_bias).find("blk.2.exp_probs_b.bias"), std::string::npos);
}

// A prompt batch through the dense layer and the mixtures gives one token at a time's logits.
TEST(MixtureRules, Glm4MoeBatchesGiveOneTokenAtATimesLogits) {
  const auto m = Model::load(glm_model(), false);
  const std::vector<int32_t> tokens = strata::testing::random_tokens(*m, 12, 3);
  const std::vector<float> one = strata::testing::decode_one_by_one(*m, tokens);
  ThreadPool pool(2);
  Session batch(*m, 32, pool);
  const std::span<const float> all = batch.eval(tokens, /*all_logits=*/true);
  EXPECT_LT(strata::testing::relative_difference(one, {all.begin(), all.end()}), 1e-5);
}

// A file with nextn layers (counted in block_count): the trunk runs, the extra layer's tensors
// are accepted unused; its logits are the full file's cut after the trunk's layers.
TEST(MixtureRules, NextnLayersAreAcceptedUnusedAndTheTrunkRuns) {
  const std::string path = glm_model();
  const auto with_mtp =
      Model::load(strata::testing::with_keys(path, "glm_nextn.gguf",
                                             {{"glm4moe.nextn_predict_layers", GgufValue::u32(1)}}),
                  false);
  EXPECT_EQ(with_mtp->config.n_layer, 2);
  EXPECT_EQ(with_mtp->config.n_layer_nextn, 1);
  EXPECT_EQ(with_mtp->weights.layers.size(), 2u);
  const auto full = Model::load(path, false);
  const std::vector<int32_t> tokens = {5, 9, 100, 3};
  ThreadPool pool(2);
  Session trunk(*with_mtp, 32, pool);
  SessionOptions cut;
  cut.exit_layer = 2;
  Session early(*full, 32, pool, cut);
  const std::span<const float> a = trunk.eval(tokens, true);
  const std::vector<float> from_trunk(a.begin(), a.end());
  const std::span<const float> b = early.eval(tokens, true);
  EXPECT_EQ(from_trunk, std::vector<float>(b.begin(), b.end()));
}

TEST(MixtureRules, SparseModesRefuseLeadingDenseLayers) {
  const auto m = Model::load(glm_model(), false);
  m->ensure_down_t();
  ThreadPool pool(2);
  SessionOptions o;
  o.ffn = FfnMode::GateFirst;
  try {
    Session s(*m, 32, pool, o);
    FAIL() << "gate-first ran a mixture with leading dense layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("leading dense layers"), std::string::npos) << e.what();
  }
}

// strata synth --expert-type: the routed experts in their own type (gpt-oss's MXFP4), the rest
// (router, shared expert, attention) in the file's.
TEST(MixtureRules, SynthWritesTheExpertsInTheirOwnType) {
  const std::string path = strata::testing::temp_file("glm_mxfp4_experts.gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = "glm4moe";
  s.shape.n_layer = 3, s.shape.n_expert = 8, s.shape.n_expert_used = 3, s.shape.head_dim = 32;
  s.type = DType::Q8_0;
  s.expert_type = DType::MXFP4;
  write_synthetic_model(s, path);
  const auto m = Model::load(path, false);
  const LayerWeights& l = m->weights.layers[1];
  for (const ExpertMatrices& x : l.experts)
    for (const MatrixView* v : {&x.gate, &x.up, &x.down}) EXPECT_EQ(v->type, DType::MXFP4);
  EXPECT_EQ(l.shared.up.type, DType::Q8_0);
  EXPECT_EQ(l.attn_q.type, DType::Q8_0);
  EXPECT_EQ(m->weights.layers[0].shared.up.type, DType::Q8_0);  // the dense layer's FFN
  const std::vector<int32_t> tokens = {3, 50, 7};
  for (float x : strata::testing::decode_one_by_one(*m, tokens)) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace strata
