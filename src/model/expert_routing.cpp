#include "model/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace strata {

namespace {

// a ranks before b: the larger score, NaN last, the lower id on a tie.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// Each expert's probability (double) from its logit: the softmax over all (shifted by the largest
// finite logit; NaN gives 0) or the sigmoid (NaN stays NaN: it ranks last, weighs 0).
void probabilities(const float* z, int64_t n_expert, ExpertGating gating, double* p) {
  if (gating == ExpertGating::Sigmoid) {
    for (int64_t e = 0; e < n_expert; ++e) p[e] = 1.0f / (1.0f + std::exp(-z[e]));
    return;
  }
  double top = 0.0;
  bool any = false;
  for (int64_t e = 0; e < n_expert; ++e)
    if (std::isfinite(z[e]) && (!any || z[e] > top)) top = z[e], any = true;
  double total = 0.0;
  for (int64_t e = 0; e < n_expert; ++e)
    total += p[e] = std::isnan(z[e]) ? 0.0 : std::exp(z[e] - top);
  for (int64_t e = 0; e < n_expert; ++e) p[e] = total > 0.0 ? p[e] / total : 0.0;
}

// The experts of the groups outside the best groups_used lose their chance (score -inf). A
// group's score: the sum of its two best (its one where a group has one expert).
void limit_to_groups(float* score, int64_t n_expert, int64_t groups, int64_t groups_used) {
  const int64_t per = n_expert / groups;
  std::vector<float> group_score(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    float best = -std::numeric_limits<float>::infinity(), second = best;
    for (int64_t e = g * per; e < (g + 1) * per; ++e) {
      const float s = std::isnan(score[e]) ? -std::numeric_limits<float>::infinity() : score[e];
      if (s > best)
        second = best, best = s;
      else if (s > second)
        second = s;
    }
    group_score[static_cast<size_t>(g)] = per > 1 ? best + second : best;
  }
  std::vector<int32_t> order(static_cast<size_t>(groups));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + groups_used, order.end(),
                    [&](int32_t i, int32_t j) {
                      return ranks_before(group_score[static_cast<size_t>(i)], i,
                                          group_score[static_cast<size_t>(j)], j);
                    });
  std::vector<uint8_t> kept(static_cast<size_t>(groups), 0);
  for (int64_t i = 0; i < groups_used; ++i)
    kept[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  for (int64_t e = 0; e < groups * per; ++e)
    if (!kept[static_cast<size_t>(e / per)]) score[e] = -std::numeric_limits<float>::infinity();
}

}  // namespace

void route_tokens(const float* logits, int64_t n, int64_t n_expert, int64_t k,
                  const RoutingRule& rule, const float* selection_bias, int32_t* experts,
                  float* weights) {
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::vector<double> p(static_cast<size_t>(n_expert));
  std::vector<float> score(static_cast<size_t>(n_expert));
  const bool grouped = rule.groups > 1 && n_expert % rule.groups == 0 && rule.groups_used >= 1 &&
                       rule.groups_used < rule.groups;
  for (int64_t b = 0; b < n; ++b) {
    const float* z = logits + b * n_expert;
    probabilities(z, n_expert, rule.gating, p.data());
    // The softmax ranks as its logits do (and keeps their float ties); a sigmoid's score is
    // its f32 value, plus the correction bias.
    for (int64_t e = 0; e < n_expert; ++e) {
      const auto i = static_cast<size_t>(e);
      score[i] = rule.gating == ExpertGating::Softmax && selection_bias == nullptr
                     ? z[e]
                     : static_cast<float>(p[i]) + (selection_bias ? selection_bias[e] : 0.0f);
      if (std::isnan(z[e])) score[i] = std::numeric_limits<float>::quiet_NaN();
    }
    if (grouped) limit_to_groups(score.data(), n_expert, rule.groups, rule.groups_used);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t i, int32_t j) {
      return ranks_before(score[static_cast<size_t>(i)], i, score[static_cast<size_t>(j)], j);
    });
    double total = 0.0;
    const auto prob = [&](int32_t e) {
      const double v = p[static_cast<size_t>(e)];
      return std::isnan(v) ? 0.0 : v;
    };
    for (int64_t s = 0; s < k; ++s) total += prob(order[static_cast<size_t>(s)]);
    // llama.cpp clamps the sum at the smallest normal f16 before dividing.
    const double divisor = rule.normalize ? std::max(total, 6.103515625e-5) : 1.0;
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = order[static_cast<size_t>(s)];
      experts[b * k + s] = e;
      weights[b * k + s] = static_cast<float>(prob(e) / divisor * rule.scale);
    }
  }
}

}  // namespace strata
