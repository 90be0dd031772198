#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace strata {

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::None:
      return "none";
    case RopeScalingType::Linear:
      return "linear";
    case RopeScalingType::Yarn:
      return "yarn";
  }
  return "?";
}

namespace {

// YaRN's correction range: the pairs whose wavelength fits `rotations` turns in the original
// context (ggml_rope_yarn_corr_dims, in float as there).
float corr_dim(int64_t n_rot, int64_t n_ctx_orig, float rotations, float base) {
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

}  // namespace

void rope_angles(const RopeParams& p, int64_t pos, float* cos, float* sin) {
  const int64_t half = p.n_rot / 2;
  const RopeScaling& s = p.scaling;
  const double freq_scale = s.type == RopeScalingType::None ? 1.0 : s.freq_scale;
  const bool yarn = s.type == RopeScalingType::Yarn;
  double mscale = s.attn_factor;
  float low = 0.0f, high = 0.0f;
  if (yarn) {
    const float factor = static_cast<float>(1.0 / freq_scale);
    if (factor > 1.0f) mscale *= 1.0 + 0.1 * std::log(static_cast<double>(factor));
    const int64_t n_ctx = std::max<int64_t>(s.n_ctx_orig, 1);
    low = std::max(0.0f, std::floor(corr_dim(p.n_rot, n_ctx, s.beta_fast, p.freq_base)));
    high = std::min(static_cast<float>(p.n_rot - 1),
                    std::ceil(corr_dim(p.n_rot, n_ctx, s.beta_slow, p.freq_base)));
  }
  for (int64_t i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) *
                   std::pow(static_cast<double>(p.freq_base),
                            -2.0 * static_cast<double>(i) / static_cast<double>(p.n_rot));
    if (!p.freq_factors.empty()) theta /= p.freq_factors[static_cast<size_t>(i)];
    double angle = freq_scale * theta;
    if (yarn) {
      // 1 for the high-frequency pairs (kept as trained), 0 for the low ones (interpolated).
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const double ramp = 1.0 - std::min(1.0f, std::max(0.0f, y));
      angle = angle * (1.0 - ramp) + theta * ramp;
    }
    cos[i] = static_cast<float>(std::cos(angle) * mscale);
    sin[i] = static_cast<float>(std::sin(angle) * mscale);
  }
}

}  // namespace strata
