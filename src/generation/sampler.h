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

// Which tokens may come next (a grammar: generation/grammar_constraint.h).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual bool allows(int32_t token) const = 0;
  // allowed[t] = 1 for every token that may come next (allowed has n_vocab entries).
  virtual void mask(std::vector<uint8_t>& allowed) const = 0;
  virtual void accept(int32_t token) = 0;  // the token chosen; it must be allowed
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  // history: tokens so far (prompt and generated), for the repetition penalty. With a
  // constraint, the token drawn as usual is kept when allowed; otherwise every token it does not
  // allow is masked (-inf) and the draw repeats, as llama.cpp does: greedy and plain temperature
  // sampling then draw from exactly the masked distribution, and a draw that is allowed costs one
  // check, not a pass over the vocabulary. Top-k/top-p/min-p see the masked candidates on the
  // second draw only. The chosen token is accepted by the constraint; -1 when it allows none.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history,
                 TokenConstraint* constraint = nullptr);

 private:
  int32_t draw(std::span<const float> logits, std::span<const int32_t> history);
  double next_uniform();  // [0, 1)

  SamplerParams params_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<float> masked_;
  std::vector<uint8_t> allowed_;
};

}  // namespace strata
