// How many positions each server slot gets when -c is not given: the model's context (at most
// 4096), lowered when the KV cache of all slots would take more than half of the memory there
// is (the rest is for weights and buffers), but never below kMinSlotContext (or the model's
// context, if smaller). A pure function: serve prints what it chose, and -c overrides it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/run_context.h"

namespace strata {

inline constexpr int64_t kMinSlotContext = 256;

inline int64_t default_slot_context(int64_t n_ctx_train, int slots, uint64_t kv_bytes_per_position,
                                    uint64_t memory) {
  const int64_t wanted = run_context(0, n_ctx_train);
  const int64_t floor = std::min(wanted, kMinSlotContext);
  if (kv_bytes_per_position == 0 || slots < 1) return wanted;
  const uint64_t fits = memory / 2 / kv_bytes_per_position / static_cast<uint64_t>(slots);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(fits, 1ull << 40)), floor,
                             wanted);
}

}  // namespace strata
