#include "generation/token_logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace strata {

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int top_n) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size())
    fail("token {} is outside the {} logits", id, logits.size());
  if (top_n < 0) fail("top_n {} is negative", top_n);
  double most = -INFINITY;
  for (const float v : logits) most = std::max(most, static_cast<double>(v));
  double sum = 0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v) - most);
  const double log_z = most + std::log(sum);
  auto logprob = [&](int32_t t) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(t)]) - log_z);
  };
  TokenLogprob r;
  r.id = id;
  r.logprob = logprob(id);
  const size_t n = std::min(static_cast<size_t>(top_n), logits.size());
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](int32_t a, int32_t b) {
                      const float x = logits[static_cast<size_t>(a)];
                      const float y = logits[static_cast<size_t>(b)];
                      return x > y || (x == y && a < b);
                    });
  for (size_t i = 0; i < n; ++i) r.top.emplace_back(order[i], logprob(order[i]));
  return r;
}

}  // namespace strata
