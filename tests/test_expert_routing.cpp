// The mixture-of-experts router's decision (runtime/expert_routing.h): which experts, in which
// order, with which weights; ties and damaged logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/expert_routing.h"

namespace strata {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, int64_t n, int64_t k,
             ExpertWeighting how = ExpertWeighting::SoftmaxOfChosen) {
  const int64_t n_expert = static_cast<int64_t>(logits.size()) / n;
  Routed r{std::vector<int32_t>(static_cast<size_t>(n * k)),
           std::vector<float>(static_cast<size_t>(n * k))};
  route_tokens(logits.data(), n, n_expert, k, how, r.experts.data(), r.weights.data());
  return r;
}

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
  const Routed r = route(logits, 1, 1, ExpertWeighting::Softmax);
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

}  // namespace
}  // namespace strata
