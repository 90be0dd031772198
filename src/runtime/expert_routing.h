// A mixture-of-experts router's decision, a pure function: from each token's router logits, the
// experts it uses and their weights. Mixtral's rule (HF MixtralSparseMoeBlock, llama.cpp's
// norm_w): the softmax over all experts, the k largest, renormalized to sum to 1 (the same as a
// softmax over the chosen k logits). Qwen-MoE without norm_topk_prob keeps the softmax's values.
// Ties between equal logits go to the lower expert id; a NaN logit ranks below every number, so
// a damaged router still gives k distinct experts.
#pragma once

#include <cstdint>

namespace strata {

enum class ExpertWeighting {
  SoftmaxOfChosen,  // Mixtral: the chosen experts' softmax renormalized over them
  Softmax,          // the softmax over all experts, not renormalized
};

// For each of n tokens: logits[b * n_expert ...] -> experts[b * k + s], descending by logit (the
// choice's order), and weights[b * k + s]. The softmax is taken in double.
void route_tokens(const float* logits, int64_t n, int64_t n_expert, int64_t k, ExpertWeighting how,
                  int32_t* experts, float* weights);

}  // namespace strata
