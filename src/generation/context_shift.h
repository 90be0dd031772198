// llama.cpp's context shift (--context-shift, --keep N) for generation past a full context:
// the first tokens stay (BOS and --keep N of the prompt), the older half of the rest is dropped,
// and generation goes on. strata evaluates the remaining tokens again instead of rotating their
// cached keys: the kept prefix's cache is exact as it is (a token attends only to earlier ones),
// and the tail becomes exactly what a fresh run on the remaining text computes, on every tier
// and device, for a prompt pass over at most half the context per shift.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace strata {

// How many leading tokens a shift keeps: llama.cpp's --keep N counts prompt tokens after BOS,
// which always stays; N < 0 or beyond the prompt keeps the whole prompt.
int64_t tokens_kept(int64_t keep_flag, int64_t prompt_tokens, bool bos_added);

struct ContextShift {
  int64_t keep = 0;     // leading tokens that stay
  int64_t discard = 0;  // tokens dropped after them; 0: nothing can be dropped
};
// The shift of a full context of n_past tokens: half of those after `keep` (rounded down), as
// llama.cpp's n_discard = (n_past - n_keep) / 2.
ContextShift plan_context_shift(int64_t n_past, int64_t keep);

// Applies `shift` to a session whose cache holds `in_context` (n_past tokens), then evaluates
// `next` after what remains and returns its logits. `in_context` becomes the tokens the cache
// holds. Fails (strata::Error) when the shift drops nothing.
std::span<const float> shift_context(Session& session, std::vector<int32_t>& in_context,
                                     const ContextShift& shift, int32_t next);

}  // namespace strata
