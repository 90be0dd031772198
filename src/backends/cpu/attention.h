// Scaled dot-product attention of the query heads that share one KV head (a grouped-query
// group; one head for multi-head attention) over the cached positions of one token: the
// group's scores come from register-tiled products (each cached key row read once for all the
// group's heads, instead of one dot call per head and position), the weighted values from the
// value-sum kernel (each cached value row read once for all the group's heads).
#pragma once

#include <cstdint>

#include "backends/cpu/kernels.h"

namespace strata {

// Query heads per KV head that attend_group's callers provide room for.
inline constexpr int kMaxHeadsPerGroup = 256;

struct CachedHead {
  const void* k;      // position 0's key of this KV head (F32 or F16 elements)
  const void* v;      // position 0's value
  bool k_f16, v_f16;  // element types
  int64_t stride;     // elements from one position to the next
};

// out[g][0, hd) = softmax over p < n_pos of (q[g] . k_p * scale) weighted sum of v_p, for the
// group's `group` heads. `scores` (n_pos * group floats) is scratch.
void attend_group(const CpuKernels& k, const float* const* q, int group, int64_t hd,
                  const CachedHead& kv, int64_t n_pos, float scale, float* scores,
                  float* const* out);

}  // namespace strata
