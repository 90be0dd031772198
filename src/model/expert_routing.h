// A mixture-of-experts router's decision, a pure function: from each token's router logits, the
// experts it uses and their weights, by the family's rule (llama.cpp's build_moe_ffn):
//   1. probabilities: the softmax over all experts (Mixtral, Qwen) or each logit's sigmoid
//      (GLM-4.5, DeepSeek-V3: <arch>.expert_gating_func 2);
//   2. the selection score: the probability plus a per-expert correction bias where the layer
//      has one (exp_probs_b: chosen by the biased score, weighed by the unbiased probability);
//   3. group-limited choice (DeepSeek-V3): the experts in groups of n_expert / groups, a group
//      scored by the sum of its two best scores, only the best groups_used groups eligible;
//   4. the top k by score; their weights the probabilities, divided by their sum when the rule
//      normalizes (Mixtral's softmax over the chosen; GLM's expert_weights_norm), times scale.
// Ties go to the lower expert id; a NaN logit ranks below every number, so a damaged router
// still gives k distinct experts and no NaN weight.
#pragma once

#include <cstdint>

namespace strata {

enum class ExpertGating : uint8_t { Softmax, Sigmoid };

struct RoutingRule {
  ExpertGating gating = ExpertGating::Softmax;
  bool normalize = true;  // the chosen weights divided by their sum
  float scale = 1.0f;     // then multiplied by this (<arch>.expert_weights_scale)
  int64_t groups = 1;     // expert groups (<arch>.expert_group_count); 1: no grouping
  int64_t groups_used = 1;
};

// For each of n tokens: logits[b * n_expert ...] -> experts[b * k + s], descending by score
// (the choice's order), and weights[b * k + s]. selection_bias: n_expert values or null.
// The softmax is taken in double; sigmoid scores in float, as llama.cpp's f32 graph.
void route_tokens(const float* logits, int64_t n, int64_t n_expert, int64_t k,
                  const RoutingRule& rule, const float* selection_bias, int32_t* experts,
                  float* weights);

}  // namespace strata
