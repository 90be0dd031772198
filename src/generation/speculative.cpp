#include "generation/speculative.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace strata {

void check_speculation(const SpeculationParams& p) {
  if (p.draft_max < 1 || p.draft_min < 1 || p.draft_min > p.draft_max)
    fail("--draft-min {} and --draft-max {}: 1 <= min <= max", p.draft_min, p.draft_max);
  if (p.ngram_min < 1 || p.ngram_min > p.ngram_max)
    fail("prompt lookup's n-grams of {} to {} tokens: 1 <= min <= max", p.ngram_min, p.ngram_max);
  check_draft_p_min(p.p_min);
}

DraftBackoff next_backoff(DraftBackoff b, size_t kept) {
  constexpr int kLongestWait = 16;
  if (kept > 0) return {};
  return {b.wait, std::min(2 * b.wait, kLongestWait)};
}

bool draft_now(DraftBackoff& b) {
  if (b.skip == 0) return true;
  --b.skip;
  return false;
}

SpeculativeDecoder::SpeculativeDecoder(Session& session, Sampler& sampler,
                                       TokenConstraint* constraint, Drafter& drafter,
                                       const SpeculationParams& params)
    : session_(session),
      sampler_(sampler),
      constraint_(constraint),
      drafter_(drafter),
      params_(params) {
  check_speculation(params_);
}

std::vector<int32_t> SpeculativeDecoder::step(std::vector<int32_t>& history,
                                              const std::function<bool(int32_t)>& stop) {
  if (history.empty()) fail("speculative decoding needs the pending token in the history");
  // Room in the context for the pending token and a draft.
  const int64_t room = session_.n_ctx() - session_.n_past() - 1;
  const int max =
      static_cast<int>(std::min<int64_t>(params_.draft_max, std::max<int64_t>(room, 0)));
  Timer drafting;
  std::vector<int32_t> draft = max > 0 && draft_now(backoff_) ? drafter_.draft_one(history, max)
                                                              : std::vector<int32_t>{};
  stats_.draft_s += drafting.seconds();
  Timer verifying;
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
  stats_.verify_s += verifying.seconds();
  if (draft.empty()) {
    ++stats_.plain;
    return drawn;
  }
  size_t kept = 0;
  while (kept < drawn.size() && kept < draft.size() && drawn[kept] == draft[kept]) ++kept;
  ++stats_.steps;
  stats_.drafted += draft.size();
  stats_.accepted += kept;
  backoff_ = next_backoff(backoff_, kept);
  return drawn;
}

}  // namespace strata
