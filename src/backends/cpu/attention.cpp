#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>

namespace strata {

void attend_group(const CpuKernels& k, const float* const* q, int group, int64_t hd,
                  const CachedHead& kv, int64_t n_pos, float scale, float* scores,
                  float* const* out) {
  // scores[p * group + g] = q[g] . k_p, a panel of positions at a time.
  constexpr int64_t kPanel = 64;
  for (int64_t p0 = 0; p0 < n_pos; p0 += kPanel) {
    const int rows = static_cast<int>(std::min(kPanel, n_pos - p0));
    if (kv.k_f16)
      k.dot_f16_tile(static_cast<const uint16_t*>(kv.k) + p0 * kv.stride, kv.stride, rows, q, group,
                     hd, scores + p0 * group);
    else
      k.dot_f32_tile(static_cast<const float*>(kv.k) + p0 * kv.stride, kv.stride, rows, q, group,
                     hd, scores + p0 * group);
  }
  // Softmax per head, all the group's heads side by side (scores are position-major).
  float max[kMaxHeadsPerGroup], sum[kMaxHeadsPerGroup];
  std::fill(max, max + group, -INFINITY);
  std::fill(sum, sum + group, 0.0f);
  for (int64_t p = 0; p < n_pos; ++p) {
    float* s = scores + p * group;
    for (int g = 0; g < group; ++g) {
      s[g] *= scale;
      max[g] = std::max(max[g], s[g]);
    }
  }
  for (int64_t p = 0; p < n_pos; ++p) {
    float* s = scores + p * group;
    for (int g = 0; g < group; ++g) {
      s[g] = std::exp(s[g] - max[g]);
      sum[g] += s[g];
    }
  }
  for (int64_t p = 0; p < n_pos; ++p) {
    float* s = scores + p * group;
    for (int g = 0; g < group; ++g) s[g] /= sum[g];
  }
  // The weighted value sums of all the group's heads in one pass over the values.
  k.attend_values(kv.v, kv.v_f16, kv.stride, scores, group, n_pos, hd, out);
}

}  // namespace strata
