// The CUDA kernels' per-element math (backends/cuda/block_math.h) on the CPU, against the
// definitions the CPU backend and the reference ops use: every weight type's unit and element
// decoding against dequantize_row, the butterfly sum's order, RoPE pairs and activations
// against the CPU backend. (The f16 conversions are tensor/half.h's own, tested there.) These
// run on every machine; a GPU run then checks only indexing and launches (BackendOps on cuda).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cuda/block_math.h"
#include "model/column_group_copy.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

using namespace cuda_math;

template <DType T>
void expect_decoding_matches_dequantize() {
  const int64_t n = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n), ref(n);
  for (float& v : x) v = d(rng);
  std::vector<uint8_t> row(row_bytes(T, n));
  quantize_row(T, x.data(), row.data(), n);
  dequantize_row(T, row.data(), ref.data(), n);
  float unit[kUnit];
  for (int64_t u = 0; u < n / kUnit; ++u) {
    Decode<T>::unit(row.data(), u, unit);
    for (int i = 0; i < kUnit; ++i)
      ASSERT_EQ(unit[i], ref[static_cast<size_t>(u * kUnit + i)])
          << dtype_name(T) << " unit " << u << " value " << i;
  }
  for (int64_t j = 0; j < n; ++j)
    ASSERT_EQ(Decode<T>::value(row.data(), j), ref[static_cast<size_t>(j)])
        << dtype_name(T) << " value " << j;
}

TEST(CudaMath, EveryTypeDecodesAsDequantization) {
  expect_decoding_matches_dequantize<DType::F32>();
  expect_decoding_matches_dequantize<DType::F16>();
  expect_decoding_matches_dequantize<DType::BF16>();
  expect_decoding_matches_dequantize<DType::Q8_0>();
  expect_decoding_matches_dequantize<DType::Q4_0>();
  expect_decoding_matches_dequantize<DType::Q2_K>();
  expect_decoding_matches_dequantize<DType::Q3_K>();
  expect_decoding_matches_dequantize<DType::Q4_K>();
  expect_decoding_matches_dequantize<DType::Q5_K>();
  expect_decoding_matches_dequantize<DType::Q6_K>();
  for (const DType t : kUnitTypeList)
    if (has_unit_quantizer(t))
      with_unit_type(t, []<DType T>() { expect_decoding_matches_dequantize<T>(); });
}

// The axpy's weight of a column-group copy (TEAL's copies of quantized matrices, whose rows are
// the inputs) is the file's row-major value, read through the rows' own decoder.
template <DType T>
void expect_column_group_weights_are_the_rows() {
  const int64_t n_out = 128, n_in = 512;
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const uint64_t rb = row_bytes(T, n_in);
  std::vector<uint8_t> rows(rb * n_out);
  std::vector<float> x(n_in);
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& v : x) v = d(rng);
    quantize_row(T, x.data(), rows.data() + r * rb, n_in);
  }
  const MatrixView w{T, rows.data(), n_in, n_out, rb};
  std::vector<uint8_t> copy(column_groups_copy_bytes(std::span(&w, 1)));
  const MatrixView c = build_column_groups(std::span(&w, 1), copy.data());
  for (int64_t j = 0; j < n_in; ++j)
    for (int64_t i = 0; i < n_out; ++i) {
      ASSERT_EQ(axpy_weight<T>(c.data, c.row_bytes, c.cols, true, j, i),
                Decode<T>::value(rows.data() + i * rb, j))
          << dtype_name(T) << " input " << j << " output " << i;
      if (j < 2 && i < 2) {  // rows read as rows
        ASSERT_EQ(axpy_weight<T>(rows.data(), rb, n_in, false, i, j),
                  Decode<T>::value(rows.data() + i * rb, j));
      }
    }
}

TEST(CudaMath, ColumnGroupCopiesDecodeToTheFileRowsValues) {
  expect_column_group_weights_are_the_rows<DType::Q8_0>();
  expect_column_group_weights_are_the_rows<DType::Q4_0>();
  expect_column_group_weights_are_the_rows<DType::Q4_K>();
  expect_column_group_weights_are_the_rows<DType::Q5_K>();
  expect_column_group_weights_are_the_rows<DType::Q6_K>();
  expect_column_group_weights_are_the_rows<DType::Q2_K>();
  expect_column_group_weights_are_the_rows<DType::Q3_K>();
}

TEST(CudaMath, TheButterflySumPairsLanesInAFixedOrder) {
  float lanes[32];
  for (int l = 0; l < 32; ++l) lanes[l] = 1.0f + static_cast<float>(l) * 1e-7f;
  float copy[32];
  std::copy(lanes, lanes + 32, copy);
  // Step 16 adds lane l and l ^ 16 first: the total is the sum of those pair sums' tree.
  float level[32];
  std::copy(copy, copy + 32, level);
  for (int width = 16; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) level[l] = level[l] + level[l + width];
  EXPECT_EQ(lane_tree_sum(lanes), level[0]);
  float ones[32];
  std::fill(ones, ones + 32, 0.5f);
  EXPECT_EQ(lane_tree_sum(ones), 16.0f);
}

TEST(CudaMath, RotationAndActivationsAreTheCpuBackendsFormulas) {
  float x0 = 0.3f, x1 = -1.7f;
  const float c = std::cos(0.9f), s = std::sin(0.9f);
  rotate_pair(x0, x1, c, s);
  EXPECT_EQ(x0, 0.3f * c - -1.7f * s);
  EXPECT_EQ(x1, 0.3f * s + -1.7f * c);
  for (float g : {-2.0f, -0.0f, 0.5f, 3.0f})
    for (float u : {-1.0f, 0.25f, 2.0f}) {
      EXPECT_EQ(activate(FfnActivation::SwiGLU, g, u), g / (1.0f + std::exp(-g)) * u);
      EXPECT_EQ(activate(FfnActivation::ReGLU, g, u), g > 0 ? g * u : 0.0f);
      EXPECT_EQ(activate(FfnActivation::DReLU, g, u), g > 0 && u > 0 ? g * u : 0.0f);
      EXPECT_EQ(activate(FfnActivation::ReLU, g, u), std::max(u, 0.0f));
      EXPECT_EQ(activate(FfnActivation::GELU, g, u), gelu_tanh(u));
      EXPECT_EQ(activate(FfnActivation::GeGLU, g, u), gelu_tanh(g) * u);
    }
  // llama.cpp's tanh GELU at a few points (values of the formula in double).
  EXPECT_NEAR(gelu_tanh(1.0f), 0.8411919906, 1e-6);
  EXPECT_NEAR(gelu_tanh(-2.0f), -0.0454023059, 1e-6);
  EXPECT_EQ(gelu_tanh(0.0f), 0.0f);
}

TEST(CudaMath, RopePairsAreAdjacentOrNeoxHalves) {
  EXPECT_EQ(rope_first(false, 3), 6);
  EXPECT_EQ(rope_second(false, 3, 8), 7);
  EXPECT_EQ(rope_first(true, 3), 3);
  EXPECT_EQ(rope_second(true, 3, 8), 11);
}

}  // namespace
}  // namespace strata
