#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

std::vector<float> random_values(int n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Half, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00) continue;  // inf/nan checked below
    EXPECT_EQ(f32_to_f16(f16_to_f32(bits)), bits) << std::hex << h;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f)), 1.0f);
  // 1 + 2^-11 is exactly half way between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is half way between 1+2^-10 (odd) and 1+2^-9 (even).
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(70000.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);  // below half of it
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001)), 0x3f81);
}

struct TypeTolerance {
  DType type;
  float max_rel_rms;  // RMS error of a round trip relative to the RMS of the data
};

class RoundTrip : public ::testing::TestWithParam<TypeTolerance> {};

TEST_P(RoundTrip, DequantizeOfQuantizeIsClose) {
  const auto [type, tol] = GetParam();
  const int n = 4096;
  const auto x = random_values(n, 7);
  std::vector<uint8_t> q(row_bytes(type, n));
  quantize_row(type, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(type, q.data(), y.data(), n);
  double err = 0, ref = 0;
  for (int i = 0; i < n; ++i) {
    err += (x[i] - y[i]) * (x[i] - y[i]);
    ref += x[i] * x[i];
  }
  EXPECT_LE(std::sqrt(err / ref), tol) << dtype_name(type);
  EXPECT_GT(std::sqrt(err / ref), type == DType::F32 ? -1.0 : 0.0);
  // Quantizing the dequantized values again reproduces the same bytes (idempotent).
  std::vector<uint8_t> q2(q.size());
  quantize_row(type, y.data(), q2.data(), n);
  EXPECT_EQ(q, q2) << dtype_name(type);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip,
                         ::testing::Values(TypeTolerance{DType::F32, 0.0f},
                                           TypeTolerance{DType::F16, 1e-3f},
                                           TypeTolerance{DType::BF16, 5e-3f},
                                           TypeTolerance{DType::Q8_0, 1e-2f},
                                           TypeTolerance{DType::Q4_0, 0.15f}));

TEST(Quantize, Q8_0BlockLayoutMatchesGguf) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);  // max |x| = 16
  BlockQ8_0 b;
  quantize_row_q8_0(x.data(), &b, 32);
  EXPECT_FLOAT_EQ(f16_to_f32(b.d), f16_to_f32(f32_to_f16(16.0f / 127.0f)));
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[24], static_cast<int8_t>(std::lround(8 * 127.0f / 16.0f)));
}

TEST(Quantize, Q4_0NibbleOrderMatchesGguf) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // largest magnitude, negative: scale = -8 / -8 = 1
  x[1] = 3.0f;
  x[16] = 7.0f;
  BlockQ4_0 b;
  quantize_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);      // element 0: -8 + 8
  EXPECT_EQ(b.qs[1] & 0x0f, 11);     // element 1: 3 + 8
  EXPECT_EQ(b.qs[0] >> 4, 15);       // element 16: 7 + 8
  EXPECT_EQ(b.qs[2], (8 << 4) | 8);  // zeros
  std::vector<float> y(32);
  dequantize_row(DType::Q4_0, &b, y.data(), 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[16], 7.0f);
}

}  // namespace
}  // namespace strata
