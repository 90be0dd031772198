#include "runtime/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace strata {

namespace {

// a ranks before b: the larger logit, NaN last, the lower id on a tie.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

}  // namespace

void route_tokens(const float* logits, int64_t n, int64_t n_expert, int64_t k, ExpertWeighting how,
                  int32_t* experts, float* weights) {
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int64_t b = 0; b < n; ++b) {
    const float* z = logits + b * n_expert;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [z](int32_t i, int32_t j) { return ranks_before(z[i], i, z[j], j); });
    // The softmax's shift: the largest finite logit (0 when there is none).
    double top = 0.0;
    bool any = false;
    for (int64_t e = 0; e < n_expert; ++e)
      if (std::isfinite(z[e]) && (!any || z[e] > top)) top = z[e], any = true;
    auto exp_of = [&](int32_t e) { return std::isnan(z[e]) ? 0.0 : std::exp(z[e] - top); };
    double total = 0.0;
    if (how == ExpertWeighting::Softmax)
      for (int32_t e = 0; e < n_expert; ++e) total += exp_of(e);
    else
      for (int64_t s = 0; s < k; ++s) total += exp_of(order[static_cast<size_t>(s)]);
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = order[static_cast<size_t>(s)];
      experts[b * k + s] = e;
      weights[b * k + s] = total > 0.0 ? static_cast<float>(exp_of(e) / total) : 0.0f;
    }
  }
}

}  // namespace strata
