#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"
#include "generation/sampler.h"
#include "generation/token_logprobs.h"

namespace strata {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f};

TEST(Sampler, GreedyPicksTheArgmax) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  EXPECT_EQ(s.sample(kLogits, {}), 1);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  const std::vector<int32_t> history = {1};
  EXPECT_EQ(s.sample(kLogits, history), 4);  // 3.0 / 1.1 < 2.9
}

// OpenAI's penalties: logit -= frequency * count + presence * (count > 0), over the last
// repeat_last_n tokens; logit_bias added first (-inf bans a token).
TEST(Sampler, PresenceFrequencyPenaltiesAndLogitBias) {
  SamplerParams p;
  p.temperature = 0;
  p.presence_penalty = 0.05f;  // 3.0 - 0.05 = 2.95 > 2.9: token 1 stays ahead
  EXPECT_EQ(Sampler(p).sample(kLogits, std::vector<int32_t>{1}), 1);
  p.frequency_penalty = 0.05f;  // seen twice: 3.0 - 0.1 - 0.05 = 2.85 < 2.9
  EXPECT_EQ(Sampler(p).sample(kLogits, std::vector<int32_t>{1, 1}), 4);
  EXPECT_EQ(Sampler(p).sample(kLogits, std::vector<int32_t>{1}), 1);  // once: 2.9 - tie, lower id
  p.repeat_last_n = 1;  // only the last token counts
  EXPECT_EQ(Sampler(p).sample(kLogits, std::vector<int32_t>{1, 0}), 1);
  SamplerParams b;
  b.temperature = 0;
  b.logit_bias = {{0, 2.5f}};  // 1.0 + 2.5 = 3.5
  EXPECT_EQ(Sampler(b).sample(kLogits, {}), 0);
  b.logit_bias = {{1, -INFINITY}, {4, -INFINITY}};
  EXPECT_EQ(Sampler(b).sample(kLogits, {}), 2);
  b.temperature = 1.0f;  // sampling never draws a banned token
  Sampler s(b);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.sample(kLogits, {});
    EXPECT_NE(t, 1);
    EXPECT_NE(t, 4);
  }
}

// Logprobs: the log-softmax of the logits as they are, the alternatives most likely first (ties
// to the lower id), probabilities that sum to 1 over the vocabulary.
TEST(TokenLogprobs, AreTheLogSoftmaxAndTheMostLikelyAlternatives) {
  const TokenLogprob t = token_logprob(kLogits, 2, 3);
  double z = 0;
  for (const float v : kLogits) z += std::exp(static_cast<double>(v));
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);
  EXPECT_EQ(t.top[1].first, 4);
  EXPECT_EQ(t.top[2].first, 2);
  EXPECT_FLOAT_EQ(t.top[2].second, t.logprob);
  double total = 0;
  for (const auto& [id, lp] : token_logprob(kLogits, 0, 99).top) total += std::exp(lp);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(token_logprob(std::vector<float>{1, 1, 1}, 0, 2).top[1].first, 1);  // ties: lower id
  EXPECT_TRUE(token_logprob(kLogits, 0, 0).top.empty());
  EXPECT_THROW(token_logprob(kLogits, 5, 1), Error);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  std::vector<int32_t> a, b, c;
  p.seed = 42;
  Sampler s1(p), s2(p);
  p.seed = 43;
  Sampler s3(p);
  for (int i = 0; i < 200; ++i) {
    a.push_back(s1.sample(kLogits, {}));
    b.push_back(s2.sample(kLogits, {}));
    c.push_back(s3.sample(kLogits, {}));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  Sampler s(p);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.sample(kLogits, {})]++;
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double expected = std::exp(kLogits[i]) / z;
    EXPECT_NEAR(counts[static_cast<int32_t>(i)] / double(n), expected, 0.015) << i;
  }
}

TEST(Sampler, TopKTopPAndMinPRestrictTheCandidates) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.top_k = 2;  // only tokens 1 and 4
  Sampler k(p);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = k.sample(kLogits, {});
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
  p.top_k = 0;
  p.top_p = 0.3f;  // token 1 alone has p ~ 0.37
  Sampler tp(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(tp.sample(kLogits, {}), 1);
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 p(max): 1 (3.0), 4 (2.9), 2 (2.0: e^-1 < .5: no)
  Sampler mp(p);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = mp.sample(kLogits, {});
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
}

}  // namespace
}  // namespace strata
