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

// `product` on a (m x depth) and b (n x depth, or depth x n when b_by_columns) against the
// plain loop; c[at(i, j)] holds a[i] . (b's j-th vector). The same bits on 1 and 3 threads.
template <class Product>
void expect_product(Product product, int64_t m, int64_t n, int64_t depth, bool b_by_columns) {
  const auto a = random_matrix(m, depth, 1);
  const auto b = b_by_columns ? random_matrix(depth, n, 2) : random_matrix(n, depth, 2);
  std::vector<float> one, three;
  ThreadPool pool1(1), pool3(3);
  product(pool1, a, b, one);
  product(pool3, a, b, three);
  ASSERT_EQ(one.size(), static_cast<size_t>(m * n));
  EXPECT_EQ(one, three) << "thread count changed the sums";
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t c = 0; c < depth; ++c)
        want += double{a[i * depth + c]} * (b_by_columns ? b[c * n + j] : b[j * depth + c]);
      const float got = b_by_columns ? one[j * m + i] : one[i * n + j];
      ASSERT_NEAR(got, want, 1e-5 * depth) << m << "x" << n << "x" << depth;
    }
}

void expect_abt(const CpuKernels& k, int64_t m, int64_t n, int64_t depth) {
  expect_product(
      [&](ThreadPool& pool, const std::vector<float>& a, const std::vector<float>& b,
          std::vector<float>& c) { multiply_abt(k, pool, a.data(), m, b.data(), n, depth, c); },
      m, n, depth, false);
}

void expect_ab_transposed(const CpuKernels& k, int64_t m, int64_t n, int64_t depth) {
  expect_product(
      [&](ThreadPool& pool, const std::vector<float>& a, const std::vector<float>& b,
          std::vector<float>& c) {
        multiply_ab_transposed(k, pool, a.data(), m, b.data(), n, depth, c);
      },
      m, n, depth, true);
}

TEST(FloatProducts, MatchPlainLoopsInEveryOrientation) {
  for (const CpuKernels* k : {&scalar_kernels(), &best_kernels()}) {
    expect_abt(*k, 40, 200, 37);   // b the weight side, a in token lanes
    expect_abt(*k, 200, 40, 37);   // a the weight side, the result transposed
    expect_abt(*k, 200, 5, 64);    // too few tokens for a lane group: plain dot products
    expect_abt(*k, 3, 7, 300);
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
