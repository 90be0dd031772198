// Prompt batches of float weights with a lane per token (backends/cpu/token_lanes.h): every
// kernel variant against the scalar reference bit for bit, and whole batched products against
// each (row, token)'s fused sum in column order at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/token_lanes.h"
#include "core/thread_pool.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

std::vector<float> normal_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

struct FloatMatrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
  float at(int64_t r, int64_t k) const {
    const uint8_t* row = bytes.data() + r * view.row_bytes;
    if (view.type == DType::F32) return reinterpret_cast<const float*>(row)[k];
    const uint16_t h = reinterpret_cast<const uint16_t*>(row)[k];
    return view.type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
};

FloatMatrix float_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  FloatMatrix m;
  const auto values = normal_values(rows * cols, seed);
  const uint64_t rb = row_bytes(type, cols);
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(type, values.data() + r * cols, m.bytes.data() + r * rb, cols);
  m.view = {type, m.bytes.data(), cols, rows, rb};
  return m;
}

// What every token-lane product must be: the fused sum of its terms in column order from zero.
float fused_in_order(const FloatMatrix& m, int64_t r, const float* x) {
  float acc = 0.0f;
  for (int64_t k = 0; k < m.view.cols; ++k) acc = std::fma(m.at(r, k), x[k], acc);
  return acc;
}

TEST(TokenLanes, EveryVariantEqualsTheFusedSumInColumnOrderBitForBit) {
  // Columns around the kernels' 128-column chunks and vector widths; groups past the widest
  // pass (4) and tokens short of a whole last group (zeros in its lanes).
  for (const CpuKernels* k : supported_kernels())
    for (DType type : {DType::F32, DType::F16, DType::BF16})
      for (int64_t cols : {1, 7, 128, 129, 300}) {
        const FloatMatrix m = float_matrix(type, 16, cols, 7 + static_cast<uint32_t>(cols));
        for (int64_t tokens : {int64_t{k->token_lanes}, int64_t{k->token_lanes} * 2 + 3,
                               int64_t{k->token_lanes} * 5}) {
          const auto xs = normal_values(tokens * cols, 11);
          std::vector<const float*> ptrs;
          for (int64_t t = 0; t < tokens; ++t) ptrs.push_back(xs.data() + t * cols);
          TokenLaneActivations lanes;
          lanes.prepare(ptrs, cols, k->token_lanes);
          ASSERT_EQ(lanes.groups(), (tokens + k->token_lanes - 1) / k->token_lanes);
          const int64_t width = int64_t{lanes.groups()} * k->token_lanes;
          for (int n_rows : {1, 5, 16}) {
            std::vector<float> out(static_cast<size_t>(n_rows * width), -1.0f);
            const int64_t stride = static_cast<int64_t>(m.view.row_bytes) / (type == DType::F32 ? 4 : 2);
            k->dot_float_lanes(type, m.view.data, stride, n_rows, lanes.data(), lanes.groups(), cols,
                               out.data());
            for (int r = 0; r < n_rows; ++r)
              for (int64_t t = 0; t < width; ++t) {
                const float want = t < tokens ? fused_in_order(m, r, ptrs[t]) : 0.0f;
                ASSERT_EQ(out[static_cast<size_t>(r * width + t)], want)
                    << k->name << " " << dtype_name(type) << " cols " << cols << " tokens "
                    << tokens << " rows " << n_rows << " at " << r << "," << t;
              }
          }
        }
      }
}

TEST(TokenLanes, BatchedProductsOfFloatWeightsGoThroughLanesAtAnyThreadCount) {
  // A whole batched product (rows not a multiple of 16, a short last group): each output the
  // fused sum in column order, the same bits at 1, 2 and 3 threads; and within rounding of
  // the plain dot product.
  const CpuKernels& k = best_kernels();
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t rows = 37, cols = 200, tokens = int64_t{k.token_lanes} + 5;
    const FloatMatrix m = float_matrix(type, rows, cols, 3);
    const auto xs = normal_values(tokens * cols, 5);
    std::vector<PreparedInput> in(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) in[t].prepare_for(k, xs.data() + t * cols, cols, type);
    // F16 batches go through AMX-BF16 tiles where the CPU has them; F32 and BF16 never do.
    if (batch_forms(k, in, std::vector<DType>{type}).lanes == nullptr) {
      ASSERT_EQ(type, DType::F16);
      continue;
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<size_t>(tokens * rows), -1.0f);
      matmat_multi(k, {MatMatJob{&m.view, y.data(), rows}}, in, pool);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          const float got = y[static_cast<size_t>(t * rows + r)];
          ASSERT_EQ(got, fused_in_order(m, r, xs.data() + t * cols))
              << dtype_name(type) << " threads " << threads << " at " << r << "," << t;
          EXPECT_NEAR(got, dot_row(scalar_kernels(), m.view, r, in[t]), 1e-4f * cols);
        }
    }
  }
}

TEST(TokenLanes, TakeBatchesOfAtLeastOneWholeGroup) {
  EXPECT_FALSE(uses_token_lanes(1, 16));
  EXPECT_FALSE(uses_token_lanes(15, 16));
  EXPECT_TRUE(uses_token_lanes(16, 16));
  EXPECT_TRUE(uses_token_lanes(64, 16));
  EXPECT_TRUE(uses_token_lanes(8, 8));
  EXPECT_FALSE(uses_token_lanes(64, 0));
  EXPECT_EQ(TokenLaneActivations::bytes(17, 100, 2), (32 * 100 + 2 * 16 * 32) * sizeof(float));
}

TEST(TokenLanes, RefuseWeightsThatAreNotFloats) {
  const CpuKernels& k = best_kernels();
  std::vector<uint8_t> bytes(row_bytes(DType::Q8_0, 64) * 16);
  const MatrixView w{DType::Q8_0, bytes.data(), 64, 16, row_bytes(DType::Q8_0, 64)};
  const auto xs = normal_values(16 * 64, 1);
  std::vector<const float*> ptrs;
  for (int t = 0; t < 16; ++t) ptrs.push_back(xs.data() + t * 64);
  TokenLaneActivations lanes;
  lanes.prepare(ptrs, 64, k.token_lanes);
  std::vector<float> y(16 * 16);
  EXPECT_THROW(token_lane_rows(k, w, 0, 16, lanes, y.data(), 16), std::exception);
}

}  // namespace
}  // namespace strata
