// Speculative decoding with drafts that propose one continuation each step (prompt lookup, a
// draft model's greedy tokens: generation/drafter.h). The target evaluates the pending token and
// the draft in one batch, then the sampler draws each position's token in order from the
// target's logits, keeping the draft while its token equals the draw. For a draft that puts all
// its probability on one token d, speculative sampling's rule (accept with probability p(d),
// else draw from p without d) gives each token its target probability; drawing from p and
// accepting when the draw is d does exactly that, with the draws plain decoding makes, in the
// same order. So the text equals the text without speculation for the same seed, greedy or
// sampled, wherever the batch's logits equal one token's at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "generation/drafter.h"
#include "generation/sampler.h"
#include "runtime/session.h"

namespace strata {

struct SpeculationParams {
  int draft_max = 16;  // tokens drafted a step (llama.cpp's --draft-max)
  int draft_min = 1;   // fewer found: a plain step (--draft-min)
  // Prompt lookup: the history's last ngram_max .. ngram_min tokens looked up earlier in it.
  int ngram_min = 2, ngram_max = 4;
  // A draft model keeps drafting while its most likely token has at least this probability
  // (--draft-p-min; 0 as llama.cpp v0.5.0: a small model is rarely that sure, and a draft it
  // stops at once costs its pass for nothing).
  float p_min = 0.0f;
};
// Fails naming the first bad value.
void check_speculation(const SpeculationParams& p);

// After a draft fails at its first token the next ones wait: each failure in a row doubles the
// steps that skip drafting (1, 2, 4 .. 16), and a kept draft token ends the wait. On text that
// does not repeat (prompt lookup) or with a draft that disagrees, a few drafts are verified in
// vain, not one every step; skipping never changes the text.
struct DraftBackoff {
  int skip = 0;  // steps left without a draft
  int wait = 1;  // steps the next failure skips
};
// The backoff after a step that drafted `drafted` tokens (> 0) and kept `kept` of them.
DraftBackoff next_backoff(DraftBackoff b, size_t kept);
// Whether this step drafts; a skipped step is counted off.
bool draft_now(DraftBackoff& b);

// How many drafted tokens the target kept, over a generation.
struct SpeculationStats {
  uint64_t steps = 0;     // batches of a pending token and a draft
  uint64_t drafted = 0;   // draft tokens evaluated
  uint64_t accepted = 0;  // of them, kept
  uint64_t plain = 0;     // steps without a draft (none found, or no room in the context)
  double draft_s = 0, verify_s = 0;  // time drafting, and evaluating batches and drawing
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  SpeculationStats& operator+=(const SpeculationStats& o) {
    steps += o.steps, drafted += o.drafted, accepted += o.accepted, plain += o.plain;
    draft_s += o.draft_s, verify_s += o.verify_s;
    return *this;
  }
};

class SpeculativeDecoder {
 public:
  // Drafts from `drafter` (which outlives the decoder).
  SpeculativeDecoder(Session& session, Sampler& sampler, TokenConstraint* constraint,
                     Drafter& drafter, const SpeculationParams& params);

  // The tokens drawn after the pending one (drawn already, at the end of `history`, not
  // evaluated yet), at least one, each appended to `history` as it is drawn; `stop` sees each
  // (-1: the grammar allows no token) and ends the step when it says true. The session then
  // holds the pending token and every returned token but the last (the next pending one).
  std::vector<int32_t> step(std::vector<int32_t>& history,
                            const std::function<bool(int32_t)>& stop);
  const SpeculationStats& stats() const { return stats_; }

 private:
  Session& session_;
  Sampler& sampler_;
  TokenConstraint* constraint_;
  Drafter& drafter_;
  SpeculationParams params_;
  SpeculationStats stats_;
  DraftBackoff backoff_;
  std::vector<int32_t> batch_;
};

}  // namespace strata
