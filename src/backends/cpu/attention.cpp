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
  constexpr int kRows = 8;  // positions per axpy call
  for (int g = 0; g < group; ++g) {
    float max = -INFINITY;
    for (int64_t p = 0; p < n_pos; ++p) {
      float& s = scores[p * group + g];
      s *= scale;
      max = std::max(max, s);
    }
    float sum = 0.0f;
    for (int64_t p = 0; p < n_pos; ++p) {
      float& s = scores[p * group + g];
      s = std::exp(s - max);
      sum += s;
    }
    float* o = out[g];
    std::fill(o, o + hd, 0.0f);
    for (int64_t p0 = 0; p0 < n_pos; p0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, n_pos - p0));
      float weight[kRows];
      const void* v[kRows];
      for (int r = 0; r < rows; ++r) {
        weight[r] = scores[(p0 + r) * group + g] / sum;
        v[r] =
            kv.v_f16
                ? static_cast<const void*>(static_cast<const uint16_t*>(kv.v) +
                                           (p0 + r) * kv.stride)
                : static_cast<const void*>(static_cast<const float*>(kv.v) + (p0 + r) * kv.stride);
      }
      if (kv.v_f16)
        k.axpy_f16(reinterpret_cast<const uint16_t* const*>(v), weight, rows, o, hd, nullptr, 0);
      else
        k.axpy_f32(reinterpret_cast<const float* const*>(v), weight, rows, o, hd, nullptr, 0);
    }
  }
}

}  // namespace strata
