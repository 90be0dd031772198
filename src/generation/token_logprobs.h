// A generated token's log-probability and its most likely alternatives (OpenAI's logprobs and
// top_logprobs, llama-server's n_probs), a pure function of the step's logits as the model gave
// them: before logit_bias, penalties, truncation and temperature, so the numbers are the
// model's distribution whatever the sampling settings (OpenAI reports it so). The log-softmax
// is taken in double; the alternatives are the top_n most likely tokens, descending, ties to
// the lower id (the chosen token among them when it is one of them).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace strata {

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first
};

// Fails (strata::Error) for an id outside the logits or a negative top_n.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int top_n);

}  // namespace strata
