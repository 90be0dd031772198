// What the backend op tests share (test_backend_ops.cpp: the products; test_backend_layer_ops.cpp:
// the layer's other ops): random weights of every type and layout, random activations, the
// tolerances and the scale of rounding, and the BackendOps fixture, one backend per instance
// (INSTANTIATE_TEST_SUITE_P in test_backend_ops.cpp instantiates the tests of both files).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/reference_ops.h"
#include "backends/registry.h"
#include "tensor/interleaved_rows.h"
#include "tensor/kquants.h"
#include "tensor/quantize.h"

namespace strata::testing {

struct Weights {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

inline Weights random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed,
                              bool interleave) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Weights w;
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(cols));
  w.bytes.resize(rb * static_cast<uint64_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = d(rng);
    quantize_row(type, row.data(), w.bytes.data() + rb * static_cast<uint64_t>(r), cols);
  }
  w.view = MatrixView{type, w.bytes.data(), cols, rows, rb};
  if (interleave) {
    interleave_rows16(type, w.bytes.data(), rows, cols);
    w.view.layout = Layout::Interleaved16;
  }
  return w;
}

inline std::vector<float> random_rows(int64_t n, int64_t dim, uint32_t seed, double zeros = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> x(static_cast<size_t>(n * dim));
  for (float& v : x) v = u(rng) < zeros ? 0.0f : d(rng);
  return x;
}

inline double product_tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 1e-5;
    case DType::F16:
    case DType::BF16:
      return 1e-4;
    default:
      return 1e-2;
  }
}

// The CUDA backends multiply the activations as they are (f32), so every weight type's products
// are the reference's within f32 rounding; batches above 8 tokens go through a GEMM on f16
// activations and f16 weights (2^-11 relative each).
inline double product_tolerance(DType t, const std::string& backend, int64_t n, bool gemm_path) {
  if (!backend.starts_with("cuda")) return product_tolerance(t);
  return gemm_path && n > 8 ? 2e-3 : 1e-5;
}

// Sum over i of |w_i x_i|: the scale of the rounding in one product.
inline double magnitude(const MatrixView& w, int64_t r, const float* x) {
  const std::vector<float> row = reference::weight_row(w, r);
  double m = 0;
  for (size_t i = 0; i < row.size(); ++i) m += std::abs(double{row[i]} * x[i]);
  return m;
}

struct Case {
  DType type;
  bool interleaved;
};

inline std::vector<Case> product_cases() {
  return {{DType::F32, false},  {DType::F16, false},  {DType::BF16, false}, {DType::Q8_0, false},
          {DType::Q4_0, false}, {DType::Q8_0, true},  {DType::Q4_0, true},  {DType::Q2_K, false},
          {DType::Q3_K, false}, {DType::Q4_K, false}, {DType::Q5_K, false}, {DType::Q6_K, false},
          {DType::Q4_K, true},  {DType::Q4_1, false}, {DType::Q5_0, false}, {DType::Q5_1, false},
          {DType::IQ4_NL, false}, {DType::IQ4_XS, false}, {DType::MXFP4, false}};
}

inline constexpr DType kRowTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                      DType::Q4_0, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                      DType::Q5_K, DType::Q6_K, DType::Q4_1, DType::Q5_0,
                                      DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
// Row lengths: short ones, whole super-blocks for the types of 256-value blocks.
inline int64_t row_length(DType t, int64_t short_length) {
  return dtype_info(t).block_size > 32 ? 512 : short_length;
}

// One backend per instance (backend_names()): one this build or machine lacks (cuda without a
// GPU) is reported as skipped, test by test.
class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why_not;
    auto be = make_backend(GetParam(), pool, &why_not);
    if (be == nullptr) GTEST_SKIP() << GetParam() << ": " << why_not;
    backends.push_back({GetParam(), std::move(be)});
  }
  ThreadPool pool{2};
  std::vector<NamedBackend> backends;  // the one under test, as {name, backend}
};

}  // namespace strata::testing
