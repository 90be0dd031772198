// The context a run's KV cache holds when none is asked (-c 0): the model's trained context, at
// most 4096 positions (a 128K-context model would otherwise reserve gigabytes of cache for a
// short chat). One rule for run, chat, plan and serve's slots, so a plan sizes the cache the run
// will hold.
#pragma once

#include <algorithm>
#include <cstdint>

namespace strata {

inline constexpr int64_t kDefaultContextCap = 4096;

// asked > 0: that context; else the model's (n_ctx_train; 0 when the file does not say) capped.
inline int64_t run_context(int64_t asked, int64_t n_ctx_train) {
  if (asked > 0) return asked;
  return n_ctx_train > 0 ? std::min(n_ctx_train, kDefaultContextCap) : kDefaultContextCap;
}

}  // namespace strata
