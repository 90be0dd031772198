// Overflow-checked size arithmetic for values that come from files: a corrupt count must turn
// into an error, never into a wrapped-around size that passes a bounds check.
#pragma once

#include <cstdint>

#include "core/error.h"

namespace strata {

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("size overflow while computing {}", what);
  return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("size overflow while computing {}", what);
  return r;
}

inline uint64_t align_up(uint64_t value, uint64_t alignment, const char* what) {
  const uint64_t rem = value % alignment;
  return rem == 0 ? value : checked_add(value, alignment - rem, what);
}

}  // namespace strata
