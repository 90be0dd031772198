// strata quantize: the recipes as a pure function (llama.cpp's mixtures, fallbacks, predictors),
// and whole files: a PowerInfer file keeps its magic, ffn_down_t and (F16 or Q4_0) predictors
// and runs in predict mode; a bundled file stays bundled and its flash-tier logits equal the
// unbundled file's bit for bit; output reads back with strata's reader.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "format/gguf.h"
#include "model/model.h"
#include "offline/bundle.h"
#include "offline/quant_recipe.h"
#include "offline/quantize.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;

TensorName layer(TensorRole role, int l) {
  return {role, l};
}

TEST(QuantRecipe, NamesAsLlamaQuantizeReadsThem) {
  EXPECT_EQ(quant_recipe_from_name("q4_k_m"), QuantRecipe::Q4_K_M);
  EXPECT_EQ(quant_recipe_from_name("Q4_K"), QuantRecipe::Q4_K_M);
  EXPECT_EQ(quant_recipe_from_name("Q3_K"), QuantRecipe::Q3_K_M);
  EXPECT_EQ(quant_recipe_from_name("f16"), QuantRecipe::F16);
  EXPECT_FALSE(quant_recipe_from_name("Q4_K_X").has_value());
  EXPECT_EQ(quant_recipe_from_name("iq2_xxs"), QuantRecipe::IQ2_XXS);
  EXPECT_FALSE(quant_recipe_from_name("Q8_1").has_value());  // a type strata cannot write
  EXPECT_EQ(quant_recipe_from_name("tq1_0"), QuantRecipe::TQ1_0);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::TQ2_0), 37u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q2_0), 41u);
  EXPECT_EQ(quant_recipe_from_name("q5_0"), QuantRecipe::Q5_0);
  EXPECT_EQ(quant_recipe_from_name("mxfp4_moe"), QuantRecipe::MXFP4_MOE);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q4_K_M), 15u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q5_0), 8u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::IQ4_XS), 30u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::MXFP4_MOE), 38u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q6_K), 18u);
}

TEST(QuantRecipe, TensorRolesFromNames) {
  EXPECT_EQ(classify_tensor("blk.7.attn_v.weight", 2).role, TensorRole::AttnV);
  EXPECT_EQ(classify_tensor("blk.7.attn_v.weight", 2).layer, 7);
  EXPECT_EQ(classify_tensor("blk.3.ffn_down_t.weight", 2).role, TensorRole::FfnDown);
  EXPECT_EQ(classify_tensor("blk.3.fc2.weight", 2).role, TensorRole::Predictor);
  EXPECT_EQ(classify_tensor("output.weight", 2).role, TensorRole::Output);
  EXPECT_EQ(classify_tensor("blk.0.attn_norm.weight", 1).role, TensorRole::Vector);
  EXPECT_EQ(classify_tensor("blk.12.ffn_up.weight", 2).layer, 12);
  // Not layer names: no digits, a sign, no dot after the number, a number past int.
  for (const char* name : {"blk..attn_q.weight", "blk.-1.attn_q.weight", "blk.3attn_q.weight",
                           "blk.3", "blk.99999999999.attn_q.weight", "xblk.3.attn_q.weight"}) {
    EXPECT_EQ(classify_tensor(name, 2).layer, -1) << name;
    // llama-quantize quantizes only what is named *weight: the rest is kept (Vector)
    EXPECT_EQ(classify_tensor(name, 2).role,
              std::string_view(name).ends_with("weight") ? TensorRole::Other : TensorRole::Vector)
        << name;
  }
  // gpt-oss's stacked expert biases: 2-D, kept as they are.
  EXPECT_EQ(classify_tensor("blk.0.ffn_up_exps.bias", 2).role, TensorRole::Vector);
}

// Q4_K_M on a 32-layer model: attn_v and ffn_down Q6_K on llama.cpp's "more bits" layers (the
// first and last eighth and every third between), Q4_K elsewhere; the output head Q6_K.
TEST(QuantRecipe, Q4KMGivesMoreBitsWhereLlamaCppDoes) {
  const RecipeOptions o{32};
  int q6 = 0;
  for (int l = 0; l < 32; ++l) {
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    const DType v = recipe_tensor_type(QuantRecipe::Q4_K_M, layer(TensorRole::AttnV, l), 4096, o);
    EXPECT_EQ(v, more ? DType::Q6_K : DType::Q4_K) << l;
    EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, layer(TensorRole::FfnDown, l), 11008, o),
              more ? DType::Q6_K : DType::Q4_K);
    EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, layer(TensorRole::AttnQ, l), 4096, o),
              DType::Q4_K);
    q6 += v == DType::Q6_K;
  }
  EXPECT_EQ(q6, 16);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, {TensorRole::Output}, 4096, o), DType::Q6_K);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, {TensorRole::Embedding}, 4096, o), DType::Q4_K);
}

TEST(QuantRecipe, OtherMixtures) {
  const RecipeOptions o{32};
  auto t = [&](QuantRecipe r, TensorRole role, int l) {
    return recipe_tensor_type(r, layer(role, l), 4096, o);
  };
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::FfnGate, 5), DType::Q2_K);  // v0.5.0: no bump
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::AttnV, 5), DType::Q3_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::AttnQ, 5), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::Embedding, -1), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::AttnV, 1), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::AttnV, 2), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::AttnOutput, 9), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_S, TensorRole::AttnV, 1), DType::Q3_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_S, TensorRole::FfnDown, 3), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_S, TensorRole::FfnDown, 4), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q5_K_S, TensorRole::FfnDown, 0), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q6_K, TensorRole::AttnQ, 0), DType::Q6_K);
  // Q2_K_S: ffn_down Q4_K on the first eighth only, attn_v Q4_K only under grouped-query
  // attention, attn_output as the base; Q3_K_L: attn_v, ffn_down, attn_output Q5_K.
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::FfnDown, 3), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::FfnDown, 4), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::AttnV, 0), DType::Q2_K);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q2_K_S, layer(TensorRole::AttnV, 0), 4096,
                               RecipeOptions{.n_layer = 32, .n_gqa = 4}),
            DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::AttnOutput, 9), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::Output, -1), DType::Q6_K);
  for (TensorRole role : {TensorRole::AttnV, TensorRole::FfnDown, TensorRole::AttnOutput})
    EXPECT_EQ(t(QuantRecipe::Q3_K_L, role, 20), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_L, TensorRole::AttnQkv, 20), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_L, TensorRole::FfnUp, 20), DType::Q3_K);
  EXPECT_TRUE(quant_recipe_needs_imatrix(QuantRecipe::Q2_K_S));
  EXPECT_FALSE(quant_recipe_needs_imatrix(QuantRecipe::Q2_K));
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q2_K_S), 21u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::Q3_K_L), 13u);
  // A fused q/k/v (Falcon) gets llama.cpp's extra bits in the _M mixtures.
  EXPECT_EQ(classify_tensor("blk.3.attn_qkv.weight", 2).role, TensorRole::AttnQkv);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::AttnQkv, 5), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q5_K_M, TensorRole::AttnQkv, 5), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::AttnQkv, 5), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_S, TensorRole::AttnQkv, 5), DType::Q4_K);
  // Q4_0 and Q8_0 files: llama-quantize writes a Q4_0 file's head as Q6_K, Q8_0's as Q8_0.
  EXPECT_EQ(t(QuantRecipe::Q4_0, TensorRole::Output, -1), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q8_0, TensorRole::Output, -1), DType::Q8_0);
  EXPECT_EQ(t(QuantRecipe::F16, TensorRole::Output, -1), DType::F16);
  // --pure: every matrix the base type.
  const RecipeOptions pure{32, true};
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, {TensorRole::Output}, 4096, pure), DType::Q4_K);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, layer(TensorRole::AttnV, 0), 4096, pure),
            DType::Q4_K);
}

// Falcon-7B's 32 layers under llama.cpp's Falcon exceptions: ffn_down nearer the base type,
// attn_output without extra bits, the head Q8_0 in every quantized file; the rest as LLaMA's.
TEST(QuantRecipe, FalconFollowsLlamaCppsFalconExceptions) {
  const RecipeOptions falcon{.n_layer = 32, .rules = falcon_architecture().quant_rules};
  ASSERT_EQ(falcon.rules, QuantRules::Falcon);
  EXPECT_EQ(llama_architecture().quant_rules, QuantRules::Default);
  auto t = [&](QuantRecipe r, TensorRole role, int l) {
    return recipe_tensor_type(r, layer(role, l), 4096, falcon);
  };
  for (QuantRecipe r : {QuantRecipe::Q4_0, QuantRecipe::Q8_0, QuantRecipe::Q2_K,
                        QuantRecipe::Q4_K_M, QuantRecipe::Q6_K})
    EXPECT_EQ(t(r, TensorRole::Output, -1), DType::Q8_0) << quant_recipe_name(r);
  EXPECT_EQ(t(QuantRecipe::F16, TensorRole::Output, -1), DType::F16);
  // Q4_K_M: layers 0-1 Q6_K, more-bits layers (2, 3, 6, 31 are; 4, 5 are not) Q5_K, else Q4_K.
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 1), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 2), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 3), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 4), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 5), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 6), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 31), DType::Q5_K);
  // Q3_K_M: layers 0-1 Q5_K, more-bits layers Q4_K, the others stay Q3_K (LLaMA's: Q4_K).
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::FfnDown, 0), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::FfnDown, 6), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_M, TensorRole::FfnDown, 5), DType::Q3_K);
  EXPECT_EQ(t(QuantRecipe::Q5_K_M, TensorRole::FfnDown, 6), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q5_K_M, TensorRole::FfnDown, 5), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_S, TensorRole::FfnDown, 0), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::FfnDown, 6), DType::Q3_K);
  for (QuantRecipe r : {QuantRecipe::Q2_K, QuantRecipe::Q3_K_M})
    EXPECT_EQ(t(r, TensorRole::AttnOutput, 9), quant_recipe_base(r)) << quant_recipe_name(r);
  EXPECT_EQ(t(QuantRecipe::Q3_K_L, TensorRole::AttnOutput, 9), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_L, TensorRole::FfnDown, 9), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::FfnDown, 3), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K_S, TensorRole::FfnDown, 4), DType::Q2_K);
  // Unchanged for Falcon: the fused q/k/v's extra bits, ffn_up's base type.
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::AttnQkv, 5), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q2_K, TensorRole::FfnUp, 5), DType::Q2_K);
  // --pure still gives every matrix the base type.
  const RecipeOptions pure{.n_layer = 32, .pure = true, .rules = QuantRules::Falcon};
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, {TensorRole::Output}, 4096, pure), DType::Q4_K);
}

// A mixture's tensors: the router never quantized, experts by their FFN role in both layouts,
// and llama.cpp's 8-expert rule (attn_k, attn_v Q8_0; attn_output Q5_K in the low mixtures).
TEST(QuantRecipe, MixturesFollowLlamaCppsExpertRules) {
  EXPECT_EQ(classify_tensor("blk.2.ffn_gate_inp.weight", 2).role, TensorRole::Router);
  EXPECT_EQ(classify_tensor("blk.2.ffn_down_exps.weight", 3).role, TensorRole::FfnDown);
  EXPECT_EQ(classify_tensor("blk.2.ffn_down_exps.weight", 3).layer, 2);
  EXPECT_EQ(classify_tensor("blk.2.ffn_gate_exps.weight", 3).role, TensorRole::FfnGate);
  EXPECT_EQ(classify_tensor("blk.2.ffn_up.7.weight", 2).role, TensorRole::FfnUp);
  EXPECT_EQ(classify_tensor("blk.2.ffn_down.12.weight", 2).role, TensorRole::FfnDown);
  // Qwen2-MoE's shared expert: its gate left as the router is, its matrices by FFN role.
  EXPECT_EQ(classify_tensor("blk.2.ffn_gate_inp_shexp.weight", 2).role, TensorRole::Router);
  EXPECT_EQ(classify_tensor("blk.2.ffn_down_shexp.weight", 2).role, TensorRole::FfnDown);
  EXPECT_EQ(classify_tensor("blk.2.ffn_up_shexp.weight", 2).role, TensorRole::FfnUp);
  for (const char* name : {"blk.2.ffn_up.x.weight", "blk.2.ffn_up..weight",
                           "blk.2.ffn_side_exps.weight", "ffn_up.7.weight"})
    EXPECT_EQ(classify_tensor(name, 2).role, TensorRole::Other) << name;
  EXPECT_EQ(classify_tensor("blk.2.ffn_up.7", 2).role, TensorRole::Vector);  // not *weight
  const RecipeOptions moe{.n_layer = 32, .n_expert = 8};
  auto t = [&](QuantRecipe r, TensorRole role, int l, const RecipeOptions& o) {
    return recipe_tensor_type(r, layer(role, l), 4096, o);
  };
  for (QuantRecipe r : {QuantRecipe::Q4_0, QuantRecipe::Q2_K, QuantRecipe::Q4_K_M,
                        QuantRecipe::Q5_K_M, QuantRecipe::Q8_0}) {
    EXPECT_EQ(t(r, TensorRole::Router, 3, moe), DType::F32) << quant_recipe_name(r);
    EXPECT_EQ(t(r, TensorRole::AttnK, 3, moe), DType::Q8_0) << quant_recipe_name(r);
    EXPECT_EQ(t(r, TensorRole::AttnV, 5, moe), DType::Q8_0) << quant_recipe_name(r);
  }
  EXPECT_EQ(t(QuantRecipe::F16, TensorRole::AttnV, 5, moe), DType::F16);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::AttnOutput, 5, moe), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q3_K_S, TensorRole::AttnOutput, 5, moe), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q5_K_M, TensorRole::AttnOutput, 5, moe), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::Q4_0, TensorRole::AttnOutput, 5, moe), DType::Q4_0);
  // The experts' down matrices get ffn_down's extra bits on the same layers.
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 6, moe), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::FfnDown, 5, moe), DType::Q4_K);
  // Other expert counts keep the dense rules (llama.cpp's rule names 8).
  const RecipeOptions four{.n_layer = 32, .n_expert = 4};
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::AttnK, 3, four), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q4_K_M, TensorRole::AttnOutput, 3, four), DType::Q4_K);
}

// The 32-value and IQ4 recipes of llama-quantize v0.5.0 (without an imatrix): the output Q6_K,
// IQ4_NL/IQ4_XS give attn_v Q5_K from 4 query heads per KV head and ffn_down Q5_K on the first
// eighth of the layers; MXFP4_MOE makes stacked experts MXFP4 and every other matrix Q8_0.
TEST(QuantRecipe, ThirtyTwoValueAndIq4Recipes) {
  const RecipeOptions o{.n_layer = 16, .n_gqa = 4}, mha{.n_layer = 16};
  auto t = [](QuantRecipe r, TensorRole role, int l, const RecipeOptions& ro) {
    return recipe_tensor_type(r, layer(role, l), 4096, ro);
  };
  for (QuantRecipe r : {QuantRecipe::Q4_1, QuantRecipe::Q5_0, QuantRecipe::Q5_1}) {
    EXPECT_EQ(t(r, TensorRole::Output, -1, o), DType::Q6_K);
    EXPECT_EQ(t(r, TensorRole::AttnV, 0, o), quant_recipe_base(r));
    EXPECT_EQ(t(r, TensorRole::FfnDown, 0, o), quant_recipe_base(r));
  }
  EXPECT_EQ(t(QuantRecipe::IQ4_XS, TensorRole::AttnV, 7, o), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::IQ4_XS, TensorRole::AttnV, 7, mha), DType::IQ4_XS);
  EXPECT_EQ(t(QuantRecipe::IQ4_NL, TensorRole::FfnDown, 1, o), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::IQ4_NL, TensorRole::FfnDown, 2, o), DType::IQ4_NL);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::IQ4_XS, layer(TensorRole::AttnQ, 0), 640, o),
            DType::IQ4_NL);  // rows of 640 values: IQ4_XS falls back
  TensorName stack = classify_tensor("blk.3.ffn_up_exps.weight", 3);
  EXPECT_TRUE(stack.expert_stack);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::MXFP4_MOE, stack, 4096, o), DType::MXFP4);
  EXPECT_EQ(t(QuantRecipe::MXFP4_MOE, TensorRole::AttnQ, 3, o), DType::Q8_0);
  EXPECT_EQ(t(QuantRecipe::MXFP4_MOE, TensorRole::Output, -1, o), DType::Q8_0);
}

// The lattice mixtures of llama-quantize v0.5.0 (llama_tensor_get_type): the 2-bit ones give
// attn_v, the first eighth's ffn_down and (IQ2_S/IQ2_M) attn_output more bits and the head Q5_K;
// the 3-bit ones their own exceptions; and which tensors need an importance matrix.
TEST(QuantRecipe, LatticeMixtures) {
  const RecipeOptions mha{.n_layer = 16, .has_imatrix = true}, gqa{.n_layer = 16, .n_gqa = 4};
  auto t = [](QuantRecipe r, TensorRole role, int l, const RecipeOptions& ro) {
    return recipe_tensor_type(r, layer(role, l), 4096, ro);
  };
  EXPECT_EQ(quant_recipe_base(QuantRecipe::IQ2_S), DType::IQ2_XS);  // llama.cpp's choice
  EXPECT_EQ(quant_recipe_base(QuantRecipe::IQ2_M), DType::IQ2_S);
  EXPECT_EQ(quant_recipe_base(QuantRecipe::IQ3_XS), DType::IQ3_S);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::IQ2_M), 29u);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::IQ3_XS), 22u);
  EXPECT_EQ(t(QuantRecipe::IQ2_XXS, TensorRole::AttnV, 5, mha), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::IQ2_XXS, TensorRole::AttnV, 5, gqa), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ2_M, TensorRole::AttnV, 5, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ2_XS, TensorRole::FfnDown, 1, mha), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::IQ2_XS, TensorRole::FfnDown, 2, mha), DType::IQ2_XS);
  EXPECT_EQ(t(QuantRecipe::IQ2_S, TensorRole::AttnOutput, 9, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ2_XXS, TensorRole::AttnOutput, 9, mha), DType::IQ2_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ2_XXS, TensorRole::Output, -1, mha), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::IQ1_S, TensorRole::AttnOutput, 9, mha), DType::IQ2_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ1_M, TensorRole::AttnV, 9, mha), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::IQ1_M, TensorRole::FfnUp, 9, mha), DType::IQ1_M);
  EXPECT_EQ(t(QuantRecipe::IQ1_S, TensorRole::Embedding, -1, mha), DType::Q2_K);
  EXPECT_EQ(quant_recipe_file_type(QuantRecipe::IQ1_M), 31u);
  // The ternary and Q2_0 files: embeddings Q4_K, the head Q6_K, rows of 640 Q4_0.
  EXPECT_EQ(t(QuantRecipe::TQ1_0, TensorRole::Embedding, -1, mha), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::Q1_0, TensorRole::Embedding, -1, mha), DType::Q1_0);
  EXPECT_EQ(t(QuantRecipe::TQ2_0, TensorRole::Output, -1, mha), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::Q2_0, TensorRole::FfnUp, 3, mha), DType::Q2_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q2_0, layer(TensorRole::AttnQ, 3), 640 + 32, mha),
            DType::Q4_0);
  EXPECT_EQ(t(QuantRecipe::IQ2_XS, TensorRole::Embedding, -1, mha), DType::Q2_K);
  EXPECT_EQ(t(QuantRecipe::IQ2_M, TensorRole::Embedding, -1, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::AttnQ, 3, mha), DType::IQ2_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::AttnV, 3, mha), DType::IQ3_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::AttnV, 3, {.n_layer = 16}), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::FfnDown, 0, {.n_layer = 16}), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::FfnDown, 9, {.n_layer = 16}), DType::Q3_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::FfnDown, 9, mha), DType::IQ3_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ3_XXS, TensorRole::Output, -1, mha), DType::Q5_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_XS, TensorRole::FfnGate, 1, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_XS, TensorRole::FfnUp, 2, mha), DType::IQ3_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ3_XS, TensorRole::FfnUp, 14, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_XS, TensorRole::AttnK, 4, mha), DType::IQ3_XXS);
  EXPECT_EQ(t(QuantRecipe::IQ3_S, TensorRole::AttnV, 4, gqa), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_S, TensorRole::AttnV, 4, mha), DType::IQ3_S);
  EXPECT_EQ(t(QuantRecipe::IQ3_S, TensorRole::Output, -1, mha), DType::Q6_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_M, TensorRole::AttnV, 4, mha), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_M, TensorRole::AttnOutput, 4, mha), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_M, TensorRole::FfnDown, 1, mha), DType::Q4_K);
  EXPECT_EQ(t(QuantRecipe::IQ3_M, TensorRole::FfnDown, 2, mha), DType::IQ3_S);
  // IQ4 keeps ffn_down at its type with an importance matrix, as llama-quantize does.
  EXPECT_EQ(t(QuantRecipe::IQ4_XS, TensorRole::FfnDown, 0, mha), DType::IQ4_XS);
  // Rows that are not whole 256-value blocks fall back to IQ4_NL.
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::IQ2_XS, layer(TensorRole::AttnQ, 3), 640, mha),
            DType::IQ4_NL);
  for (QuantRecipe r :
       {QuantRecipe::IQ2_XXS, QuantRecipe::IQ2_XS, QuantRecipe::IQ2_S, QuantRecipe::IQ2_M,
        QuantRecipe::IQ3_XXS, QuantRecipe::IQ3_XS, QuantRecipe::IQ1_S, QuantRecipe::IQ1_M})
    EXPECT_TRUE(quant_recipe_needs_imatrix(r)) << quant_recipe_name(r);
  EXPECT_FALSE(quant_recipe_needs_imatrix(QuantRecipe::IQ3_S));
  EXPECT_FALSE(quant_recipe_needs_imatrix(QuantRecipe::IQ3_M));
  EXPECT_TRUE(tensor_needs_imatrix(QuantRecipe::IQ3_M, layer(TensorRole::AttnQ, 1), DType::IQ2_S));
  EXPECT_FALSE(
      tensor_needs_imatrix(QuantRecipe::IQ3_M, layer(TensorRole::Output, -1), DType::IQ2_S));
  EXPECT_FALSE(tensor_needs_imatrix(QuantRecipe::IQ3_M, layer(TensorRole::AttnQ, 1), DType::IQ3_S));
  EXPECT_TRUE(tensor_needs_imatrix(QuantRecipe::Q2_K_S, layer(TensorRole::AttnQ, 1), DType::Q2_K));
  EXPECT_FALSE(tensor_needs_imatrix(QuantRecipe::Q2_K, layer(TensorRole::AttnQ, 1), DType::Q2_K));
}

// llama-quantize's manual choices, in its order: the output and token-embedding types as given
// (no fallback), then the first --tensor-type pattern found in the name (with the fallback),
// only where the recipe quantizes; 1-D tensors untouched.
TEST(QuantRecipe, ManualTypesAsLlamaQuantize) {
  const RecipeOptions o{.n_layer = 8};
  TypeOverrides v;
  v.output = DType::Q8_0;
  v.token_embedding = DType::Q5_1;
  add_tensor_type_override(v, "FFN_down=q5_0");  // lower-cased, as llama-quantize does
  add_tensor_type_override(v, "blk\\.[0-3]\\..*=q8_0");
  add_tensor_type_override(v, "ffn=iq4_xs");  // never reached for ffn_down: first match wins
  auto t = [&](const char* name, int64_t cols = 4096, QuantRecipe r = QuantRecipe::Q4_K_M) {
    return tensor_type_with_overrides(r, name, 2, cols, o, v);
  };
  EXPECT_EQ(t("output.weight"), DType::Q8_0);
  EXPECT_EQ(t("token_embd.weight", 100), DType::Q5_1);  // as given, even where rows do not fit
  EXPECT_EQ(t("blk.5.ffn_down.weight"), DType::Q5_0);
  EXPECT_EQ(t("blk.2.attn_q.weight"), DType::Q8_0);
  EXPECT_EQ(t("blk.5.ffn_up.weight"), DType::IQ4_XS);
  EXPECT_EQ(t("blk.5.ffn_up.weight", 640), DType::IQ4_NL);  // the fallback still applies
  EXPECT_EQ(t("blk.5.attn_q.weight"), DType::Q4_K);         // no pattern: the mixture
  EXPECT_EQ(t("blk.5.ffn_up.weight", 4096, QuantRecipe::F16), DType::F16);  // not quantized
  EXPECT_EQ(tensor_type_with_overrides(QuantRecipe::Q4_K_M, "blk.0.ffn_norm.weight", 1, 4096, o, v),
            DType::F32);
  TypeOverrides bad;
  EXPECT_THROW(add_tensor_type_override(bad, "ffn_(down=q5_0"), Error);
  EXPECT_THROW(add_tensor_type_override(bad, "ffn_down=q8_1"), Error);  // not written
  EXPECT_THROW(add_tensor_type_override(bad, "ffn_down"), Error);
  EXPECT_THROW(add_tensor_type_override(bad, "=q8_0"), Error);
}

TEST(QuantRecipe, RowsThatAreNotWholeBlocksFallBack) {
  const RecipeOptions o{8};
  // llama-quantize's fallbacks (llama-quant.cpp, tensor_type_fallback).
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, layer(TensorRole::AttnQ, 0), 3200, o),
            DType::Q5_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q5_K_M, layer(TensorRole::AttnQ, 0), 3200, o),
            DType::Q5_1);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q6_K, layer(TensorRole::AttnQ, 0), 3200, o),
            DType::Q8_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q2_K, layer(TensorRole::AttnQ, 0), 3200, o),
            DType::Q4_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q6_K, layer(TensorRole::AttnQ, 0), 100, o), DType::F16);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_0, layer(TensorRole::AttnQ, 0), 100, o), DType::F16);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, {TensorRole::Vector}, 4096, o), DType::F32);
}

TEST(QuantRecipe, PredictorsStayF16UnlessAsked) {
  const TensorName fc2 = layer(TensorRole::Predictor, 0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_0, fc2, 64, {8}), DType::F16);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_0, fc2, 64, {8, false, true}), DType::Q4_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, fc2, 64, {8, false, true}), DType::Q8_0);
  EXPECT_EQ(recipe_tensor_type(QuantRecipe::Q4_K_M, fc2, 40, {8, false, true}), DType::F16);
}

// A sparse 256-wide model written by synth (F16, PowerInfer's layout when asked).
std::string sparse_f16_model(const std::string& name, bool powerinfer) {
  SynthSpec s = synth_preset("tiny");
  s.shape.n_embd = 256, s.shape.n_ff = 512, s.shape.ffn = FfnActivation::ReGLU;
  s.type = DType::F16;
  s.density = 0.1, s.predictor_rank = 32, s.powerinfer_layout = powerinfer, s.seed = 5;
  const std::string path = temp_file(name);
  write_synthetic_model(s, path);
  return path;
}

TEST(QuantizeModel, PowerInferQ4_0FileRunsInPredictMode) {
  const std::string in = sparse_f16_model("pi-f16.gguf", true);
  const std::string out = temp_file("pi-q4_0.gguf");
  QuantizeOptions o{in, out, QuantRecipe::Q4_0};
  o.quantize_predictors = true;
  o.threads = 2;
  const QuantizeReport r = quantize_model(o);
  EXPECT_LT(r.output_bytes, r.input_bytes / 3);
  const auto f = GgufFile::open(out);
  EXPECT_TRUE(f->is_powerinfer());
  EXPECT_EQ(f->find_tensor("output.weight")->type, DType::Q6_K);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down_t.weight")->type, DType::Q4_0);
  EXPECT_EQ(f->find_tensor("blk.0.fc1.weight")->type, DType::Q4_0);
  EXPECT_EQ(f->find_tensor("blk.0.fc2.weight")->type, DType::Q4_0);
  EXPECT_EQ(f->get_int("general.file_type"), 2);
  // Predict mode (Q4_0 predictors pick the neurons) stays close to the exact sparse FFN
  // (gate-first: every neuron that fires) on the same file.
  const auto want = testing::last_logits(out, FfnMode::GateFirst),
             got = testing::last_logits(out, FfnMode::Predict);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::max(err, double{std::fabs(got[i] - want[i])}),
    scale = std::max(scale, double{std::fabs(want[i])});
  RecordProperty("predict_vs_gate_first", std::to_string(err / scale));
  EXPECT_LT(err / scale, 0.05);
  // Without --quantize-predictors they stay F16.
  QuantizeOptions keep{in, temp_file("pi-q4_0-f16pred.gguf"), QuantRecipe::Q4_0};
  quantize_model(keep);
  EXPECT_EQ(GgufFile::open(keep.output)->find_tensor("blk.1.fc1.weight")->type, DType::F16);
}

TEST(QuantizeModel, BundledFileStaysBundledAndEqualsTheUnbundledOne) {
  const std::string in = sparse_f16_model("b-f16.gguf", false);
  const std::string bundled = temp_file("b-f16.bundle.gguf");
  write_bundled_model(*Model::load(in, false), bundled);
  // Pure Q4_K: the bundles' rows get the type the plain file's FFN tensors get.
  const std::string plain_q = temp_file("b-q4k.gguf"), bundled_q = temp_file("b-q4k.bundle.gguf");
  quantize_model({in, plain_q, QuantRecipe::Q4_K_S, true, false, 2});
  quantize_model({bundled, bundled_q, QuantRecipe::Q4_K_S, true, false, 2});
  const auto f = GgufFile::open(bundled_q);
  EXPECT_EQ(f->get_int("strata.bundle.type"), static_cast<int64_t>(DType::Q4_K));
  EXPECT_NE(f->find_tensor("blk.0.ffn_bundles"), nullptr);
  EXPECT_EQ(testing::last_logits(bundled_q, FfnMode::Predict),
            testing::last_logits(plain_q, FfnMode::Predict));
}

// A Q4_K_M mixture's ffn_down rows are Q6_K on its "more bits" layers (layer 1 of 2): bundling
// stores them as Q4_K, close to the mixture's logits.
TEST(QuantizeModel, BundlingAMixtureRequantizesItsOtherRows) {
  const std::string in = sparse_f16_model("mix-f16.gguf", false);
  const std::string q = temp_file("mix-q4km.gguf"), bundled = temp_file("mix-q4km.bundle.gguf");
  quantize_model({in, q, QuantRecipe::Q4_K_M, false, false, 2});
  ASSERT_EQ(GgufFile::open(q)->find_tensor("blk.1.ffn_down_t.weight")->type, DType::Q6_K);
  const BundleReport r = write_bundled_model(*Model::load(q, false), bundled);
  EXPECT_EQ(r.type, DType::Q4_K);
  EXPECT_EQ(r.requantized_layers, 1);
  const auto want = testing::last_logits(q, FfnMode::Predict),
             got = testing::last_logits(bundled, FfnMode::Predict);
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::max(err, double{std::fabs(got[i] - want[i])}),
    scale = std::max(scale, double{std::fabs(want[i])});
  EXPECT_LT(err / scale, 0.05);
  EXPECT_GT(err, 0.0);  // the requantized rows differ
}

// A Mixtral-shape file (8 experts, 2 per token) in both tensor layouts, quantized Q4_K_M: the
// types llama-quantize gives, the two layouts' outputs the same logits, near the F16 file's.
TEST(QuantizeModel, MixtureOfEightExpertsInBothLayouts) {
  std::vector<std::vector<float>> logits;
  for (const bool stacked : {true, false}) {
    SynthSpec s = synth_preset("tiny");
    s.shape.n_embd = 256, s.shape.n_ff = 512, s.shape.n_layer = 2;
    s.shape.n_expert = 8, s.shape.n_expert_used = 2;
    s.type = DType::F16, s.stacked_experts = stacked, s.seed = 4;
    const std::string tag = stacked ? "stacked" : "split";
    const std::string in = temp_file("moe8-" + tag + "-f16.gguf");
    const std::string out = temp_file("moe8-" + tag + "-q4km.gguf");
    write_synthetic_model(s, in);
    quantize_model({in, out, QuantRecipe::Q4_K_M, false, false, 2});
    const auto f = GgufFile::open(out);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::F32);
    EXPECT_EQ(f->find_tensor("blk.0.attn_k.weight")->type, DType::Q8_0);
    EXPECT_EQ(f->find_tensor("blk.0.attn_v.weight")->type, DType::Q8_0);
    EXPECT_EQ(f->find_tensor("blk.0.attn_output.weight")->type, DType::Q5_K);
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::Q4_K);
    // ffn_down's extra bits on layer 1 of 2 (the last eighth), as a dense model's.
    const std::string down0 = stacked ? "blk.0.ffn_down_exps.weight" : "blk.0.ffn_down.7.weight";
    const std::string down1 = stacked ? "blk.1.ffn_down_exps.weight" : "blk.1.ffn_down.7.weight";
    const std::string up1 = stacked ? "blk.1.ffn_up_exps.weight" : "blk.1.ffn_up.7.weight";
    EXPECT_EQ(f->find_tensor(down0)->type, DType::Q4_K) << tag;
    EXPECT_EQ(f->find_tensor(down1)->type, DType::Q6_K) << tag;
    EXPECT_EQ(f->find_tensor(up1)->type, DType::Q4_K) << tag;
    if (stacked) {
      EXPECT_EQ(f->find_tensor(down1)->dims, (std::vector<int64_t>{512, 256, 8}));
    }
    const auto want = testing::last_logits(in, FfnMode::Dense),
               got = testing::last_logits(out, FfnMode::Dense);
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i)
      err = std::max(err, double{std::fabs(got[i] - want[i])}),
      scale = std::max(scale, double{std::fabs(want[i])});
    // Q4_K_M on a random model of this shape moves the logits 0.10-0.16 (dense, the same
    // shape); a router whose top two flip for a token doubles that (0.26 seen here).
    EXPECT_LT(err / scale, 0.35) << tag;
    logits.push_back(got);
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(QuantizeModel, AlreadyQuantizedInputIsRefusedAndLeavesNoFile) {
  const std::string in = sparse_f16_model("rq-f16.gguf", false);
  const std::string q = temp_file("rq-q4_0.gguf"), again = temp_file("rq-again.gguf");
  quantize_model({in, q, QuantRecipe::Q4_0});
  try {
    quantize_model({q, again, QuantRecipe::Q2_K});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is already Q4_0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(again));
  EXPECT_FALSE(std::filesystem::exists(again + ".tmp"));
}

}  // namespace
}  // namespace strata
