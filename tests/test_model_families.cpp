// The recipe's per-layer fields as the families' files set them (model/arch/gemma.cpp): which
// layers slide a window, their own RoPE, the attention scale and soft caps, with llama.cpp
// v0.5.0's keys and defaults; bad values refused by key; and a session running them: batches as
// one token at a time, the windowed layers' table, the caps bending the logits. The logits
// against PyTorch and llama.cpp: check_logits.py (gemma2, gemma3), docs/ARCHITECTURES.md.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "backends/refdev/reference_device.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf_writer.h"
#include "model/layer_ops.h"
#include "model/model.h"
#include "offline/synth.h"
#include "planning/device_plan.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

// A tiny model of `arch` (6 layers, window `window`), as strata synth writes it.
std::string family_model(const std::string& arch, int64_t window, const std::string& name) {
  const std::string path = strata::testing::temp_file(name);
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = arch;
  s.shape.n_layer = 6;
  s.shape.sliding_window = window;
  s.seed = 11;
  write_synthetic_model(s, path);
  return path;
}

using strata::testing::with_keys;

ModelConfig config_of(const std::string& path) {
  return ModelConfig::from_gguf(*GgufFile::open(path));
}

std::string load_error(const std::string& path) {
  try {
    config_of(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFamilies, Gemma2FilesWithoutTheirKeysTakeLlamaCppsDefaults) {
  const std::string path = family_model("gemma2", 0, "g2_bare.gguf");
  const ModelConfig c = config_of(with_keys(path, "g2_no_keys.gguf",
                                            {{"gemma2.attn_logit_softcapping", std::nullopt},
                                             {"gemma2.final_logit_softcapping", std::nullopt},
                                             {"gemma2.attention.sliding_window", std::nullopt}}));
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));  // every other, first first
  EXPECT_FLOAT_EQ(c.attention_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(c.score_scale(), 1.0f / std::sqrt(16.0f));  // head_dim 16
  EXPECT_FALSE(c.swa_rope_differs());
  EXPECT_TRUE(c.windowed(0));
  EXPECT_FALSE(c.windowed(1));
}

TEST(ModelFamilies, Gemma3ReadsItsPatternAndTheWindowedLayersRope) {
  const std::string path = family_model("gemma3", 4, "g3.gguf");
  const ModelConfig c = config_of(path);
  EXPECT_EQ(c.sliding_window, 4);
  EXPECT_EQ(c.swa_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));  // five of six
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);  // synth's Gemma 3: the family's bases
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 1e4f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale_swa, 1.0f);
  EXPECT_TRUE(c.swa_rope_differs());
  EXPECT_FLOAT_EQ(c.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.attention_softcap, 0.0f);
  // A period as llama.cpp's key may give it, then one flag per layer.
  const ModelConfig period = config_of(with_keys(
      path, "g3_period.gguf", {{"gemma3.attention.sliding_window_pattern", GgufValue::u32(3)}}));
  EXPECT_EQ(period.swa_layers, (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  std::vector<GgufValue> flags;
  for (int l = 0; l < 6; ++l) flags.push_back(GgufValue::u32(l == 2 ? 1 : 0));
  const ModelConfig listed = config_of(with_keys(
      path, "g3_listed.gguf",
      {{"gemma3.attention.sliding_window_pattern", GgufValue::array(GgufType::U32, flags)}}));
  EXPECT_EQ(listed.swa_layers, (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
  // No window: no layer slides (llama.cpp's LLAMA_SWA_TYPE_NONE).
  const ModelConfig none = config_of(family_model("gemma3", 0, "g3_none.gguf"));
  EXPECT_FALSE(none.windowed(0));
  EXPECT_FALSE(none.swa_rope_differs());
}

// Google's query_pre_attn_scalar as llama.cpp derives it: hidden / heads for the 27B shapes
// (46 layers of Gemma 2, 62 of Gemma 3), the head size otherwise.
TEST(ModelFamilies, The27bShapesScaleByHiddenOverHeads) {
  const std::string path = family_model("gemma2", 0, "g2_scale.gguf");
  const ModelConfig wide =
      config_of(with_keys(path, "g2_keylen.gguf",
                          {{"gemma2.attention.key_length", GgufValue::u32(32)},
                           {"gemma2.attention.value_length", GgufValue::u32(32)}}));
  EXPECT_FLOAT_EQ(wide.score_scale(), 1.0f / std::sqrt(32.0f));
  // 46 layers (Gemma 2 27B's count): the metadata alone says so; the tensors are not read here.
  const std::string deep = with_keys(path, "g2_46.gguf",
                                     {{"gemma2.block_count", GgufValue::u32(46)},
                                      {"gemma2.attention.key_length", GgufValue::u32(32)},
                                      {"gemma2.attention.value_length", GgufValue::u32(32)}});
  EXPECT_FLOAT_EQ(config_of(deep).score_scale(), 1.0f / std::sqrt(16.0f));  // 64 / 4 heads
}

TEST(ModelFamilies, BadValuesAreRefusedNamingTheKey) {
  const std::string g2 = family_model("gemma2", 4, "g2_bad.gguf");
  const std::string g3 = family_model("gemma3", 4, "g3_bad.gguf");
  EXPECT_NE(load_error(with_keys(g2, "g2_cap0.gguf",
                                 {{"gemma2.attn_logit_softcapping", GgufValue::f32(0.0f)}}))
                .find("gemma2.attn_logit_softcapping is 0"),
            std::string::npos);
  EXPECT_NE(load_error(with_keys(g2, "g2_capnan.gguf",
                                 {{"gemma2.final_logit_softcapping", GgufValue::f32(NAN)}}))
                .find("gemma2.final_logit_softcapping"),
            std::string::npos);
  std::vector<GgufValue> short_list(3, GgufValue::u32(1));
  EXPECT_NE(load_error(with_keys(g3, "g3_short.gguf",
                                 {{"gemma3.attention.sliding_window_pattern",
                                   GgufValue::array(GgufType::U32, short_list)}}))
                .find("has 3 entries; expected one per layer (6)"),
            std::string::npos);
  EXPECT_NE(load_error(with_keys(g3, "g3_period_big.gguf",
                                 {{"gemma3.attention.sliding_window_pattern", GgufValue::u32(99)}}))
                .find("sliding_window_pattern is 99"),
            std::string::npos);
  EXPECT_NE(load_error(with_keys(g3, "g3_base.gguf",
                                 {{"gemma3.rope.freq_base_swa", GgufValue::f32(-1.0f)}}))
                .find("gemma3.rope.freq_base_swa is -1"),
            std::string::npos);
  // Gemma 2's head is the embedding: llama.cpp's loader creates no output.weight, so a file with
  // one is refused naming it (a tensor no reader claims), not run with another head.
  std::string error;
  try {
    Model::load(with_keys(g2, "g2_head.gguf", {}, {{"output.weight", std::vector<float>(64)}}),
                false);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("'output.weight', which strata does not read for architecture gemma2"),
            std::string::npos)
      << error;
}

float largest_gap(std::span<const float> a, std::span<const float> b) {
  float gap = 0;
  for (size_t i = 0; i < a.size(); ++i) gap = std::max(gap, std::fabs(a[i] - b[i]));
  return gap;
}

// A Gemma 3 session: its windowed layers' RoPE is their own (a file whose windowed layers take
// the global base gives other logits after the first token), and a prompt batch gives one token
// at a time's logits (the second table n rows into the batch, each layer its own places).
TEST(ModelFamilies, Gemma3SessionsRotateWindowedLayersWithTheirOwnTable) {
  const std::vector<int32_t> tokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33};
  const std::string path = family_model("gemma3", 4, "g3_session.gguf");
  const auto m = Model::load(path, false);
  const auto same_base = Model::load(
      with_keys(path, "g3_same_base.gguf", {{"gemma3.rope.freq_base_swa", GgufValue::f32(1e6f)}}),
      false);
  const std::vector<float> a = strata::testing::decode_one_by_one(*m, tokens);
  const std::vector<float> b = strata::testing::decode_one_by_one(*same_base, tokens);
  const size_t v = static_cast<size_t>(m->config.n_vocab);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + v, b.begin())) << "position 0 is not rotated";
  EXPECT_GT(largest_gap(std::span(a).subspan(v), std::span(b).subspan(v)), 1e-3f);
  ThreadPool pool(2);
  Session batch(*m, 32, pool);
  const auto all = batch.eval(tokens, /*all_logits=*/true);
  float scale = 0;
  for (float x : a) scale = std::max(scale, std::fabs(x));
  EXPECT_LT(largest_gap(a, all), 1e-5f * scale);
}

// Gemma 2's final soft cap bounds every logit by the cap, and a smaller cap bends them more.
TEST(ModelFamilies, TheFinalSoftCapBoundsTheLogits) {
  const std::vector<int32_t> tokens = {1, 5, 200, 17};
  const std::string path = family_model("gemma2", 4, "g2_session.gguf");
  const auto capped = Model::load(
      with_keys(path, "g2_cap.gguf", {{"gemma2.final_logit_softcapping", GgufValue::f32(0.5f)}}),
      false);
  const std::vector<float> l = strata::testing::decode_one_by_one(*capped, tokens);
  const std::vector<float> wide =
      strata::testing::decode_one_by_one(*Model::load(path, false), tokens);
  for (float x : l) ASSERT_LT(std::fabs(x), 0.5f);
  EXPECT_GT(largest_gap(l, wide), 1e-2f);
}

// Phi-3's LongRoPE: the long table past the original context (strictly, as llama.cpp's
// get_rope_factors), rope_freqs before either; a file with one table of the two is refused; a
// session's context picks the table (the logits after position 0 differ between the two).
TEST(ModelFamilies, Phi3TakesTheLongRopeTableForContextsPastTheOriginal) {
  ModelWeights w;
  w.rope_factors_long = {4.0f, 4.0f};
  w.rope_factors_short = {1.5f, 1.5f};
  EXPECT_EQ(w.rope_divisors(4096, 4096).data(), w.rope_factors_short.data());
  EXPECT_EQ(w.rope_divisors(4097, 4096).data(), w.rope_factors_long.data());
  w.rope_freqs = {2.0f, 2.0f};
  EXPECT_EQ(w.rope_divisors(8192, 4096).data(), w.rope_freqs.data());
  EXPECT_TRUE(ModelWeights{}.rope_divisors(1, 1).empty());

  const std::string path = family_model("phi3", 0, "p3.gguf");  // head 16: 8 pairs
  std::string error;
  try {
    Model::load(with_keys(path, "p3_one.gguf", {},
                          {{"rope_factors_long.weight", std::vector<float>(8, 2.0f)}}),
                false);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("only one of rope_factors_long.weight and rope_factors_short.weight"),
            std::string::npos)
      << error;
  std::vector<float> long_table(8), short_table(8, 1.0f);
  for (int i = 0; i < 8; ++i) long_table[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i);
  const auto m = Model::load(
      with_keys(
          path, "p3_pair.gguf", {{"phi3.rope.scaling.original_context_length", GgufValue::u32(16)}},
          {{"rope_factors_long.weight", long_table}, {"rope_factors_short.weight", short_table}}),
      false);
  ASSERT_EQ(m->config.rope_scaling.n_ctx_orig, 16);
  const std::vector<int32_t> tokens = {1, 5, 200, 17};
  ThreadPool pool(2);
  Session within(*m, 16, pool), past(*m, 32, pool);
  const auto a = within.eval(tokens, true);
  const std::vector<float> short_logits(a.begin(), a.end());
  const auto b = past.eval(tokens, true);
  const std::vector<float> long_logits(b.begin(), b.end());
  const size_t v = static_cast<size_t>(m->config.n_vocab);
  EXPECT_TRUE(std::equal(short_logits.begin(), short_logits.begin() + v, long_logits.begin()));
  EXPECT_GT(largest_gap(std::span(short_logits).subspan(v), std::span(long_logits).subspan(v)),
            1e-3f);
}

// gpt-oss: its window is required (llama.cpp's get_key), every other layer slides it, the
// scores scale by 1/sqrt(n_rot), its layers need the attention sinks (a device lacking them keeps
// them on the CPU), and the sparse modes, which do not add its expert biases, are refused.
TEST(ModelFamilies, GptOssReadsItsWindowSinksAndExpertBiases) {
  const std::string path = strata::testing::temp_file("oss.gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = "gpt-oss";
  s.shape.n_layer = 4;
  s.shape.n_expert = 4;
  s.shape.n_expert_used = 2;
  s.shape.ffn = FfnActivation::SwiGLUOai;  // strata synth takes the architecture's
  write_synthetic_model(s, path);
  const auto m = Model::load(path, false);
  EXPECT_EQ(m->config.sliding_window, 128);  // synth's default: the released models'
  EXPECT_EQ(m->config.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_FLOAT_EQ(m->config.score_scale(), 1.0f / std::sqrt(16.0f));
  EXPECT_EQ(m->config.ffn, FfnActivation::SwiGLUOai);
  const LayerWeights& l = m->weights.layers[0];
  EXPECT_EQ(l.vec(LayerVector::AttnSinks).size(), 4u);
  EXPECT_EQ(l.vec(LayerVector::ExpertUpBias).size(), 4u * 192u);
  EXPECT_EQ(l.vec(LayerVector::ExpertDownBias).size(), 4u * 64u);
  EXPECT_EQ(layer_ops(m->config, 0), std::vector<LayerOp>{LayerOp::AttentionSinks});
  EXPECT_NE(load_error(with_keys(path, "oss_no_window.gguf",
                                 {{"gpt-oss.attention.sliding_window", std::nullopt}}))
                .find("gpt-oss.attention.sliding_window"),
            std::string::npos);
  ThreadPool pool(1);
  SessionOptions sparse;
  sparse.ffn = FfnMode::GateFirst;
  try {
    Session session(*m, 16, pool, sparse);
    FAIL() << "a sparse mode ran without the expert biases";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert biases (gpt-oss)"), std::string::npos) << e.what();
  }
}

// A device lacking an op of the recipe: the plan's pure rule marks every layer that needs it
// (Gemma 2's soft-capped attention, none of Gemma 3's) and keeps it on the CPU, and a session
// that would run such a layer there is refused naming the op.
TEST(ModelFamilies, LayersNeedingAnOpTheDeviceLacksStayOnTheCpu) {
  const std::string g2 = family_model("gemma2", 4, "g2_ops.gguf");
  const auto m = Model::load(g2, false);
  std::vector<std::string> ops;
  const auto no_cap = [](LayerOp op) { return op != LayerOp::AttentionSoftCap; };
  EXPECT_EQ(layers_needing_what_it_lacks(m->config, no_cap, &ops), std::vector<uint8_t>(6, 1));
  EXPECT_EQ(ops, std::vector<std::string>{"attention soft cap"});
  EXPECT_EQ(
      layers_needing_what_it_lacks(config_of(family_model("gemma3", 4, "g3_ops.gguf")), no_cap),
      std::vector<uint8_t>(6, 0));
  ReferenceDeviceOptions lacking;
  lacking.declined_ops = {LayerOp::AttentionSoftCap};
  ReferenceDevice device(lacking);
  EXPECT_FALSE(device.supports(LayerOp::AttentionSoftCap));
  try {
    Session s(*m, 16, device);
    FAIL() << "a session ran an op on a device that lacks it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 needs the attention soft cap"), std::string::npos)
        << e.what();
  }
  // The plan keeps them on the CPU (a session on the device alone with every layer on the CPU
  // is no split: the planner runs such a model on the CPU).
  PlacementPlan p;
  p.layers.resize(6);
  for (LayerPlan& l : p.layers) l.attention = Device::Accelerator;
  EXPECT_TRUE(keep_declined_on_host(p, layers_needing_what_it_lacks(m->config, no_cap), false));
  for (const LayerPlan& l : p.layers) EXPECT_EQ(l.attention, Device::Host);
  ReferenceDevice full;
  EXPECT_NO_THROW(Session(*m, 16, full));
}

}  // namespace
}  // namespace strata
