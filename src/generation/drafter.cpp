#include "generation/drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace strata {

std::vector<int32_t> Drafter::draft_one(std::span<const int32_t> history, int max) {
  std::vector<int32_t> out;
  const DraftRequest r{0, history, max, &out};
  draft(std::span<const DraftRequest>(&r, 1));
  return out;
}

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

LookupDrafter::LookupDrafter(int ngram_min, int ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_min > ngram_max)
    fail("prompt lookup's n-grams of {} to {} tokens: 1 <= min <= max", ngram_min, ngram_max);
}

void LookupDrafter::draft(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests)
    *r.out =
        r.max > 0 ? lookup_draft(r.history, ngram_min_, ngram_max_, r.max) : std::vector<int32_t>{};
}

DraftChoice draft_choice(std::span<const float> logits) {
  constexpr size_t kTopK = 10;
  std::vector<std::pair<float, int32_t>> top;
  top.reserve(kTopK + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (top.size() == kTopK && logits[i] <= top.back().first) continue;
    const std::pair<float, int32_t> c{logits[i], static_cast<int32_t>(i)};
    // Sorted by logit, the lower id first among equals (the first seen stays ahead).
    top.insert(std::upper_bound(top.begin(), top.end(), c,
                                [](const auto& a, const auto& b) { return a.first > b.first; }),
               c);
    if (top.size() > kTopK) top.pop_back();
  }
  if (top.empty()) return {};
  double sum = 0;
  for (const auto& [logit, id] : top) sum += std::exp(static_cast<double>(logit - top[0].first));
  return {top[0].second, static_cast<float>(1.0 / sum)};
}

std::string draft_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft) {
  constexpr int32_t kMaxSizeDifference = 128, kFirstCheckedId = 5;
  if (std::strcmp(target.kind(), draft.kind()) != 0)
    return fmt::format("the draft's tokenizer is {}, the target's {}", draft.kind(), target.kind());
  if (target.add_bos_default() != draft.add_bos_default() ||
      (target.add_bos_default() && target.bos() != draft.bos()))
    return fmt::format("BOS differs: the target {} token {}, the draft {} token {}",
                       target.add_bos_default() ? "adds" : "does not add", target.bos(),
                       draft.add_bos_default() ? "adds" : "does not add", draft.bos());
  if (target.add_eos_default() != draft.add_eos_default() ||
      (target.add_eos_default() && target.eos() != draft.eos()))
    return fmt::format("EOS differs: the target {} token {}, the draft {} token {}",
                       target.add_eos_default() ? "adds" : "does not add", target.eos(),
                       draft.add_eos_default() ? "adds" : "does not add", draft.eos());
  const int32_t nt = target.n_vocab(), nd = draft.n_vocab();
  if (std::abs(nt - nd) > kMaxSizeDifference)
    return fmt::format(
        "the vocabularies hold {} (target) and {} (draft) tokens, more than {} apart", nt, nd,
        kMaxSizeDifference);
  for (int32_t id = kFirstCheckedId; id < std::min(nt, nd); ++id)
    if (target.token_text(id) != draft.token_text(id))
      return fmt::format("token {} is '{}' in the target and '{}' in the draft", id,
                         target.token_text(id), draft.token_text(id));
  return {};
}

void check_draft_p_min(float p_min) {
  if (!(p_min >= 0.0f && p_min <= 1.0f)) fail("--draft-p-min {}: a probability, 0 to 1", p_min);
}

ModelDrafter::ModelDrafter(Session& session, int32_t target_vocab, float p_min)
    : session_(session),
      target_vocab_(target_vocab),
      p_min_(p_min),
      held_(static_cast<size_t>(session.n_seq())) {
  check_draft_p_min(p_min);
}

size_t ModelDrafter::keep_prefix(int seq, std::span<const int32_t> history, size_t most) {
  std::vector<int32_t>& held = held_.at(static_cast<size_t>(seq));
  size_t keep = 0;
  while (keep < held.size() && keep < most && held[keep] == history[keep]) ++keep;
  session_.truncate(seq, static_cast<int64_t>(keep));
  held.resize(keep);
  return keep;
}

void ModelDrafter::forget(int seq) {
  keep_prefix(seq, {}, 0);
}

void ModelDrafter::prepare(int seq, std::span<const int32_t> history) {
  if (history.empty() || static_cast<int64_t>(history.size()) > session_.n_ctx()) return;
  const size_t h = history.size() - 1;
  batch_.clear();
  for (size_t i = keep_prefix(seq, history, h); i < h; ++i) {
    batch_.push_back({history[i], seq, false, false});
    held_[static_cast<size_t>(seq)].push_back(history[i]);
  }
  if (!batch_.empty()) session_.decode(batch_);
}

void ModelDrafter::catch_up(const DraftRequest& r) {
  const size_t h = r.history.size();
  std::vector<int32_t>& held = held_[static_cast<size_t>(r.seq)];
  for (size_t i = keep_prefix(r.seq, r.history, h - 1); i < h; ++i) {
    batch_.push_back({r.history[i], r.seq, i + 1 == h, false});
    held.push_back(r.history[i]);
  }
}

void ModelDrafter::draft(std::span<const DraftRequest> requests) {
  batch_.clear();
  rows_.clear();
  std::vector<int> room(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    r.out->clear();
    // The history and all but the last drafted token go through the draft's cache.
    const int64_t h = static_cast<int64_t>(r.history.size());
    room[i] = static_cast<int>(std::min<int64_t>(r.max, session_.n_ctx() - h + 1));
    if (h == 0 || room[i] < 1) continue;
    catch_up(r);
    rows_.push_back(i);
  }
  while (!batch_.empty()) {
    const std::span<const float> logits = session_.decode(batch_);
    const size_t n_vocab = logits.size() / rows_.size();
    ++passes_;
    batch_.clear();
    std::vector<size_t> next;
    for (size_t row = 0; row < rows_.size(); ++row) {
      const DraftRequest& r = requests[rows_[row]];
      const DraftChoice c = draft_choice(logits.subspan(row * n_vocab, n_vocab));
      const float p_min = r.p_min >= 0 ? r.p_min : p_min_;
      if (c.token < 0 || c.token >= target_vocab_ || c.p < p_min) continue;
      r.out->push_back(c.token);
      if (static_cast<int>(r.out->size()) >= room[rows_[row]]) continue;
      batch_.push_back({c.token, r.seq, true, false});
      held_[static_cast<size_t>(r.seq)].push_back(c.token);
      next.push_back(rows_[row]);
    }
    rows_ = std::move(next);
  }
}

}  // namespace strata
