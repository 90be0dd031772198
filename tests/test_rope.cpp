// Rotary angles (model/rope.h) against their definitions: llama.cpp's rope_freqs divisors,
// linear interpolation, YaRN's ramp and magnitude, rope.scaling.attn_factor.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/rope.h"

namespace strata {
namespace {

constexpr int64_t kRot = 64;

struct Angles {
  std::vector<float> cos, sin;
  double angle(size_t i) const { return std::atan2(sin[i], cos[i]); }
  double magnitude(size_t i) const { return std::hypot(cos[i], sin[i]); }
};

Angles at(const RopeParams& p, int64_t pos) {
  Angles a{std::vector<float>(kRot / 2), std::vector<float>(kRot / 2)};
  rope_angles(p, pos, a.cos.data(), a.sin.data());
  return a;
}

double theta(int64_t pos, int64_t i, double base = 10000.0) {
  return static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / kRot);
}

// The same angle modulo 2 pi, within float rounding of cos and sin.
void expect_angle(double got, double want) {
  EXPECT_NEAR(std::remainder(got - want, 2 * M_PI), 0.0, 1e-5) << got << " vs " << want;
}

TEST(Rope, PlainAnglesArePositionTimesFrequency) {
  const RopeParams p{kRot, 10000.0f, {}, {}};
  const Angles a = at(p, 7);
  for (int64_t i = 0; i < kRot / 2; ++i) {
    expect_angle(a.angle(static_cast<size_t>(i)), theta(7, i));
    EXPECT_NEAR(a.magnitude(static_cast<size_t>(i)), 1.0, 1e-6);
  }
}

TEST(Rope, FrequencyFactorsDivideEachPairsAngle) {
  std::vector<float> factors(kRot / 2);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i % 5);
  const RopeParams p{kRot, 10000.0f, {}, factors};
  const Angles a = at(p, 11);
  for (int64_t i = 0; i < kRot / 2; ++i)
    expect_angle(a.angle(static_cast<size_t>(i)), theta(11, i) / factors[static_cast<size_t>(i)]);
}

TEST(Rope, LinearScalingInterpolatesPositionsAndNoneIgnoresTheFactor) {
  RopeParams p{kRot, 10000.0f, {}, {}};
  p.scaling.freq_scale = 0.25f;  // factor 4
  const Angles a = at(p, 8);
  for (int64_t i = 0; i < kRot / 2; ++i) expect_angle(a.angle(static_cast<size_t>(i)), theta(2, i));
  p.scaling.type = RopeScalingType::None;
  const Angles b = at(p, 8);
  for (int64_t i = 0; i < kRot / 2; ++i) expect_angle(b.angle(static_cast<size_t>(i)), theta(8, i));
}

TEST(Rope, AttnFactorScalesCosAndSin) {
  RopeParams p{kRot, 10000.0f, {}, {}};
  p.scaling.attn_factor = 1.5f;
  const Angles a = at(p, 3);
  for (size_t i = 0; i < kRot / 2; ++i) EXPECT_NEAR(a.magnitude(i), 1.5, 1e-6);
}

// YaRN (ggml's rope_yarn): the fastest pairs keep the trained angle, the slowest are
// interpolated, the magnitude is 1 + 0.1 ln(factor).
TEST(Rope, YarnKeepsFastPairsInterpolatesSlowOnesAndScalesTheMagnitude) {
  RopeParams p{kRot, 10000.0f, {}, {}};
  p.scaling.type = RopeScalingType::Yarn;
  p.scaling.freq_scale = 0.25f;
  p.scaling.n_ctx_orig = 256;
  const Angles a = at(p, 5);
  const double mscale = 1.0 + 0.1 * std::log(4.0);
  expect_angle(a.angle(0), theta(5, 0));
  expect_angle(a.angle(kRot / 2 - 1), theta(5, kRot / 2 - 1) * 0.25);
  for (size_t i = 0; i < kRot / 2; ++i) EXPECT_NEAR(a.magnitude(i), mscale, 1e-5);
  // Between the two: the angle lies between the interpolated and the trained one.
  bool blended = false;
  for (int64_t i = 1; i < kRot / 2 - 1; ++i) {
    const double t = theta(5, i), got = a.angle(static_cast<size_t>(i));
    if (t < M_PI && got > t * 0.25 + 1e-4 && got < t - 1e-4) blended = true;
  }
  EXPECT_TRUE(blended);
}

}  // namespace
}  // namespace strata
