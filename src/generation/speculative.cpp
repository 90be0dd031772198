#include "generation/speculative.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int ngram_min, int ngram_max,
                                  int max) {
  const auto n = static_cast<int64_t>(history.size());
  for (int64_t g = std::min<int64_t>(ngram_max, n - 1); g >= std::max(ngram_min, 1); --g) {
    const std::span<const int32_t> suffix = history.subspan(static_cast<size_t>(n - g));
    // Earlier places, the most recent first (a start before the suffix's own, so a token
    // follows): the first with `max` tokens after it, else the one with the most (the oldest).
    int64_t best = -1;
    for (int64_t start = n - g - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
      best = start;
      if (n - (start + g) >= max) break;
    }
    if (best < 0) continue;
    const int64_t from = best + g, to = std::min<int64_t>(n, from + max);
    return {history.begin() + from, history.begin() + to};
  }
  return {};
}

SpeculativeDecoder::SpeculativeDecoder(Session& session, Sampler& sampler,
                                       TokenConstraint* constraint,
                                       const SpeculationParams& params)
    : session_(session), sampler_(sampler), constraint_(constraint), params_(params) {
  if (params_.draft_max < 1 || params_.draft_min < 1 || params_.draft_min > params_.draft_max)
    fail("--draft-min {} and --draft-max {}: 1 <= min <= max", params_.draft_min,
         params_.draft_max);
  if (params_.ngram_min < 1 || params_.ngram_min > params_.ngram_max)
    fail("prompt lookup's n-grams of {} to {} tokens: 1 <= min <= max", params_.ngram_min,
         params_.ngram_max);
}

std::vector<int32_t> SpeculativeDecoder::step(std::vector<int32_t>& history,
                                              const std::function<bool(int32_t)>& stop) {
  if (history.empty()) fail("speculative decoding needs the pending token in the history");
  // Room in the context for the pending token and a draft.
  const int64_t room = session_.n_ctx() - session_.n_past() - 1;
  const int max = static_cast<int>(std::min<int64_t>(params_.draft_max, std::max<int64_t>(room, 0)));
  std::vector<int32_t> draft =
      max > 0 ? lookup_draft(history, params_.ngram_min, params_.ngram_max, max)
              : std::vector<int32_t>{};
  if (static_cast<int>(draft.size()) < params_.draft_min) draft.clear();
  batch_.assign(1, history.back());
  batch_.insert(batch_.end(), draft.begin(), draft.end());
  const int64_t before = session_.n_past();
  const std::span<const float> rows = session_.eval(batch_, /*all_logits=*/true);
  const size_t n_vocab = rows.size() / batch_.size();
  std::vector<int32_t> drawn;
  for (size_t i = 0; i < batch_.size(); ++i) {
    const int32_t t = sampler_.sample(rows.subspan(i * n_vocab, n_vocab), history, constraint_);
    drawn.push_back(t);
    if (t >= 0) history.push_back(t);  // < 0: the grammar allows nothing
    if (stop(t) || t < 0 || i == draft.size() || t != draft[i]) break;
  }
  // The pending token and the draft tokens the draws kept stay; the last draw is pending.
  session_.truncate(before + static_cast<int64_t>(drawn.size()));
  if (draft.empty()) {
    ++stats_.plain;
    return drawn;
  }
  size_t kept = 0;
  while (kept < drawn.size() && kept < draft.size() && drawn[kept] == draft[kept]) ++kept;
  ++stats_.steps;
  stats_.drafted += draft.size();
  stats_.accepted += kept;
  return drawn;
}

}  // namespace strata
