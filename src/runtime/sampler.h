// Token sampling with llama.cpp's controls and order: repetition penalty, top-k, top-p,
// min-p, temperature, then a draw from a seeded generator (so a seed reproduces a run exactly
// on any machine). temp <= 0 is greedy (argmax after the penalty).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;
  // OpenAI's penalties over the same last repeat_last_n tokens of the history (llama.cpp's
  // penalty_last_n): logit -= frequency_penalty * count + presence_penalty * (count > 0).
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  // Added to a token's logit before anything else (OpenAI's logit_bias; -inf bans it). Ids are
  // the caller's to check against the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  // history: tokens so far (prompt and generated), for the repetition penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  double next_uniform();  // [0, 1)

  SamplerParams params_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace strata
