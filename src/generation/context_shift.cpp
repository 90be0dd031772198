#include "generation/context_shift.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

int64_t tokens_kept(int64_t keep_flag, int64_t prompt_tokens, bool bos_added) {
  if (keep_flag < 0 || keep_flag + bos_added > prompt_tokens) return prompt_tokens;
  return keep_flag + (bos_added ? 1 : 0);
}

ContextShift plan_context_shift(int64_t n_past, int64_t keep) {
  ContextShift s;
  s.keep = std::clamp<int64_t>(keep, 0, n_past);
  s.discard = (n_past - s.keep) / 2;
  return s;
}

std::span<const float> shift_context(Session& session, std::vector<int32_t>& in_context,
                                     const ContextShift& shift, int32_t next) {
  const auto n = static_cast<int64_t>(in_context.size());
  if (shift.discard < 1)
    fail("the context ({} positions) cannot shift: --keep holds {} of them", session.n_ctx(),
         shift.keep);
  if (n != session.n_past() || shift.keep + shift.discard > n)
    fail("context shift: the cache holds {} tokens, not the {} given", session.n_past(), n);
  in_context.erase(in_context.begin() + shift.keep,
                   in_context.begin() + shift.keep + shift.discard);
  in_context.push_back(next);
  session.truncate(shift.keep);
  return session.eval(
      std::span<const int32_t>(in_context).subspan(static_cast<size_t>(shift.keep)));
}

}  // namespace strata
