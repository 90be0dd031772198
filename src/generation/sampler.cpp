#include "generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace strata {

Sampler::Sampler(const SamplerParams& params) : params_(params), state_(params.seed) {}

double Sampler::next_uniform() {
  // splitmix64: tiny, fast, and identical everywhere (std::uniform_*_distribution is not).
  state_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        TokenConstraint* constraint) {
  int32_t t = draw(logits, history);
  if (!constraint) return t;
  if (!constraint->allows(t)) {
    constraint->mask(allowed_);
    masked_.assign(logits.begin(), logits.end());
    bool any = false;
    for (size_t i = 0; i < masked_.size(); ++i) {
      if (!allowed_[i]) masked_[i] = -INFINITY;
      any = any || allowed_[i];
    }
    if (!any) return -1;
    t = draw(masked_, history);
    if (!allowed_[static_cast<size_t>(t)]) return -1;  // every allowed token was banned (-inf bias)
  }
  constraint->accept(t);
  return t;
}

int32_t Sampler::draw(std::span<const float> logits, std::span<const int32_t> history) {
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  for (const auto& [id, bias] : params_.logit_bias)
    if (id >= 0 && static_cast<size_t>(id) < candidates_.size()) candidates_[id].first += bias;

  const bool penalties = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if ((params_.repeat_penalty != 1.0f || penalties) && params_.repeat_last_n != 0) {
    const size_t n = params_.repeat_last_n < 0
                         ? history.size()
                         : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    std::unordered_map<int32_t, int> counts;
    for (auto t = history.end() - static_cast<std::ptrdiff_t>(n); t != history.end(); ++t)
      ++counts[*t];
    // In id order: the same bits whatever the map's order (each token's value changes once).
    std::vector<std::pair<int32_t, int>> seen(counts.begin(), counts.end());
    std::sort(seen.begin(), seen.end());
    for (const auto& [t, count] : seen) {
      if (t < 0 || static_cast<size_t>(t) >= candidates_.size()) continue;
      float& v = candidates_[t].first;
      if (params_.repeat_penalty != 1.0f)
        v = v > 0 ? v / params_.repeat_penalty : v * params_.repeat_penalty;
      v -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
    }
  }

  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (params_.temperature <= 0.0f)
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->second;

  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                    candidates_.end(), by_logit);
  candidates_.resize(keep);

  // Probabilities of the kept candidates (sorted, most likely first).
  std::vector<double> p(keep);
  const double max = candidates_[0].first;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(candidates_[i].first - max);
  for (auto& v : p) v /= sum;

  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += p[n++];
      if (cum >= params_.top_p) break;
    }
    keep = n;
  }
  if (params_.min_p > 0.0f) {
    size_t n = 1;
    while (n < keep && p[n] >= params_.min_p * p[0]) ++n;
    keep = n;
  }

  // Temperature on the survivors, then draw.
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += w[i] = std::exp((candidates_[i].first - max) / params_.temperature);
  double r = next_uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= w[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace strata
