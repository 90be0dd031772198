// The offline trainer's products of float matrices (offline/float_products.h) against a plain
// double-precision loop, in both orientations, below and above a group of token lanes, and the
// same bits on any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "offline/float_products.h"

namespace strata {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (auto& v : m) v = u(rng);
  return m;
}

void expect_abt(const CpuKernels& k, int64_t m, int64_t n, int64_t depth) {
  const auto a = random_matrix(m, depth, 1), b = random_matrix(n, depth, 2);
  std::vector<float> one, three;
  ThreadPool pool1(1), pool3(3);
  multiply_abt(k, pool1, a.data(), m, b.data(), n, depth, one);
  multiply_abt(k, pool3, a.data(), m, b.data(), n, depth, three);
  ASSERT_EQ(one.size(), static_cast<size_t>(m * n));
  EXPECT_EQ(one, three) << "thread count changed the sums";
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t c = 0; c < depth; ++c) want += double{a[i * depth + c]} * b[j * depth + c];
      ASSERT_NEAR(one[i * n + j], want, 1e-5 * depth) << m << "x" << n << "x" << depth;
    }
}

TEST(FloatProducts, MatchPlainLoopsInEveryOrientation) {
  for (const CpuKernels* k : {&scalar_kernels(), &best_kernels()}) {
    expect_abt(*k, 40, 200, 37);   // b the weight side, a in token lanes
    expect_abt(*k, 200, 40, 37);   // a the weight side, the result transposed
    expect_abt(*k, 200, 5, 64);    // too few tokens for a lane group: plain dot products
    expect_abt(*k, 3, 7, 300);
  }
}

void expect_ab_transposed(const CpuKernels& k, int64_t m, int64_t n, int64_t depth) {
  const auto a = random_matrix(m, depth, 4), b = random_matrix(depth, n, 5);
  std::vector<float> one, three;
  ThreadPool pool1(1), pool3(3);
  multiply_ab_transposed(k, pool1, a.data(), m, b.data(), n, depth, one);
  multiply_ab_transposed(k, pool3, a.data(), m, b.data(), n, depth, three);
  ASSERT_EQ(one.size(), static_cast<size_t>(m * n));
  EXPECT_EQ(one, three) << "thread count changed the sums";
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t c = 0; c < depth; ++c) want += double{a[i * depth + c]} * b[c * n + j];
      ASSERT_NEAR(one[j * m + i], want, 1e-5 * depth) << m << "x" << n << "x" << depth;
    }
}

TEST(FloatProducts, ProductTransposedTakesTheColumnsAsTheyLie) {
  for (const CpuKernels* k : {&scalar_kernels(), &best_kernels()}) {
    expect_ab_transposed(*k, 70, 40, 33);  // columns in token lanes
    expect_ab_transposed(*k, 70, 5, 33);   // too few columns for a lane group
  }
}

TEST(FloatProducts, TransposeMovesEveryElement) {
  const auto src = random_matrix(45, 70, 3);
  std::vector<float> dst, back;
  ThreadPool pool(2);
  transpose(pool, src.data(), 45, 70, dst);
  for (int64_t r = 0; r < 45; ++r)
    for (int64_t c = 0; c < 70; ++c) ASSERT_EQ(dst[c * 45 + r], src[r * 70 + c]);
  transpose(pool, dst.data(), 70, 45, back);
  EXPECT_EQ(back, src);
}

}  // namespace
}  // namespace strata
