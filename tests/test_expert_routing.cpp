// The mixture-of-experts router's decision (model/expert_routing.h): which experts, in which
// order, with which weights; ties and damaged logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/expert_routing.h"

namespace strata {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, int64_t n, int64_t k, RoutingRule rule = {},
             const float* bias = nullptr) {
  const int64_t n_expert = static_cast<int64_t>(logits.size()) / n;
  Routed r{std::vector<int32_t>(static_cast<size_t>(n * k)),
           std::vector<float>(static_cast<size_t>(n * k))};
  route_tokens(logits.data(), n, n_expert, k, rule, bias, r.experts.data(), r.weights.data());
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(ExpertRouting, MixtralTakesTheTopKAndTheSoftmaxOverThem) {
  // Two tokens of 4 experts, k = 2.
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 1.0f, /**/ 3.0f, -2.0f, 0.0f, 2.5f};
  const Routed r = route(logits, 2, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3, 0, 3}));
  const double a = 1.0 / (1.0 + std::exp(1.0 - 2.0));  // softmax of (2, 1)
  EXPECT_NEAR(r.weights[0], a, 1e-7);
  EXPECT_NEAR(r.weights[1], 1.0 - a, 1e-7);
  const double b = 1.0 / (1.0 + std::exp(2.5 - 3.0));
  EXPECT_NEAR(r.weights[2], b, 1e-7);
  EXPECT_NEAR(r.weights[3], 1.0 - b, 1e-7);
  // The same as the softmax over all, renormalized over the chosen (HF's order of operations).
  double all = 0;
  for (int e = 0; e < 4; ++e) all += std::exp(double{logits[static_cast<size_t>(e)]});
  const double p1 = std::exp(2.0) / all, p3 = std::exp(1.0) / all;
  EXPECT_NEAR(r.weights[0], p1 / (p1 + p3), 1e-7);
}

TEST(ExpertRouting, SoftmaxWithoutRenormalizingKeepsTheShareOfAll) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f};
  const Routed r = route(logits, 1, 1, {.normalize = false});
  EXPECT_EQ(r.experts[0], 2);
  const double all = 1.0 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / all, 1e-7);
}

TEST(ExpertRouting, TiesGoToTheLowerExpertAndEveryChoiceIsDistinct) {
  const std::vector<float> logits{1.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  const Routed r = route(logits, 1, 4);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2, 4, 0}));
  EXPECT_FLOAT_EQ(r.weights[0], r.weights[1]);
  EXPECT_FLOAT_EQ(r.weights[1], r.weights[2]);
  // All equal: the first k by id, equal weights.
  const Routed flat = route(std::vector<float>(8, 0.25f), 1, 2);
  EXPECT_EQ(flat.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(flat.weights[0], 0.5f);
}

TEST(ExpertRouting, NanLogitsRankLastAndHugeOnesDoNotOverflow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Routed r = route({nan, 1.0f, nan, 0.0f}, 1, 3);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(r.weights[2], 0.0f);  // a NaN expert weighs nothing
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0f, 1e-6);
  const Routed big = route({1e30f, 1e30f - 1e24f, -1e30f}, 1, 2);
  EXPECT_EQ(big.experts, (std::vector<int32_t>{0, 1}));
  for (const float w : big.weights) EXPECT_TRUE(std::isfinite(w));
  // Every logit NaN: distinct experts still, no NaN weight.
  const Routed none = route({nan, nan, nan}, 1, 2);
  EXPECT_EQ(none.experts, (std::vector<int32_t>{0, 1}));
  for (const float w : none.weights) EXPECT_FALSE(std::isnan(w));
}

TEST(ExpertRouting, SigmoidGatingChoosesByTheBiasedScoreAndWeighsByTheUnbiased) {
  // GLM-4.5 / DeepSeek-V3: expert 2 has the best logit, but the correction bias lifts 0 and 3.
  const std::vector<float> logits{0.0f, -1.0f, 2.0f, 1.0f};
  const float bias[4] = {0.9f, 0.0f, 0.0f, 0.3f};
  const Routed plain = route(logits, 1, 2, {.gating = ExpertGating::Sigmoid, .normalize = false});
  EXPECT_EQ(plain.experts, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(plain.weights[0], sigmoid(2.0), 1e-6);
  EXPECT_NEAR(plain.weights[1], sigmoid(1.0), 1e-6);
  // Scores 1.4, 0.27, 0.88, 1.03: experts 0 and 3, weighed by their own sigmoids.
  const Routed biased =
      route(logits, 1, 2, {.gating = ExpertGating::Sigmoid, .normalize = false}, bias);
  EXPECT_EQ(biased.experts, (std::vector<int32_t>{0, 3}));
  EXPECT_NEAR(biased.weights[0], 0.5, 1e-6);
  EXPECT_NEAR(biased.weights[1], sigmoid(1.0), 1e-6);
  // Normalized to sum 1, then scaled (expert_weights_norm, expert_weights_scale 2.5).
  const Routed normed = route(
      logits, 1, 2, {.gating = ExpertGating::Sigmoid, .normalize = true, .scale = 2.5f}, bias);
  const double total = 0.5 + sigmoid(1.0);
  EXPECT_NEAR(normed.weights[0], 2.5 * 0.5 / total, 1e-6);
  EXPECT_NEAR(normed.weights[1], 2.5 * sigmoid(1.0) / total, 1e-6);
  // A NaN logit under sigmoid ranks last and weighs nothing.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Routed damaged = route({nan, 0.0f, nan}, 1, 2, {.gating = ExpertGating::Sigmoid});
  EXPECT_EQ(damaged.experts, (std::vector<int32_t>{1, 0}));
  EXPECT_NEAR(damaged.weights[0], 1.0, 1e-6);
  EXPECT_EQ(damaged.weights[1], 0.0f);
}

TEST(ExpertRouting, GroupLimitedChoiceKeepsTheBestGroupsByTheirTwoBestScores) {
  // 8 experts in 4 groups of 2; groups scored 0.9+0.0, 0.5+0.5, 0.8+0.3, 0.2+0.1 (softmax
  // ranks by logit: logits are the scores' order here). Two groups kept: 1 (1.0) and 2 (1.1).
  const std::vector<float> logits{0.9f, 0.0f, 0.5f, 0.5f, 0.8f, 0.3f, 0.2f, 0.1f};
  const RoutingRule sig{.gating = ExpertGating::Sigmoid, .normalize = false};
  const Routed free = route(logits, 1, 3, sig);
  EXPECT_EQ(free.experts, (std::vector<int32_t>{0, 4, 2}));
  RoutingRule grouped = sig;
  grouped.groups = 4;
  grouped.groups_used = 2;
  // Sigmoid scores keep the logits' order, and a group's sum of two sigmoids orders the
  // groups as above: expert 0 (best alone) is out with its group.
  const Routed r = route(logits, 1, 3, grouped);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{4, 2, 3}));
  EXPECT_NEAR(r.weights[0], sigmoid(0.8), 1e-6);
  // All groups kept: the free choice.
  grouped.groups_used = 4;
  EXPECT_EQ(route(logits, 1, 3, grouped).experts, free.experts);
}

}  // namespace
}  // namespace strata
