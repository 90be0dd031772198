// A prompt batch's gathered rows: the split between panels and single products (a pure
// function of the need mask), every type's panels against the scalar dot product, zeros where a
// token does not need a row, and the same bits at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/gather_panels.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/sparse_ops.h"
#include "core/thread_pool.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

TEST(GatherPanels, ARowGoesThroughAPanelWhenEnoughOfAPromptNeedsIt) {
  EXPECT_TRUE(through_panel(16, 64, 0.25));
  EXPECT_FALSE(through_panel(15, 64, 0.25));
  EXPECT_TRUE(through_panel(64, 64, 0.25));
  EXPECT_FALSE(through_panel(0, 64, 0.0)) << "a row nobody needs is never computed";
  EXPECT_FALSE(through_panel(3, 3, 0.1)) << "decode-sized batches stay token by token";
  EXPECT_FALSE(through_panel(64, 64, 2.0)) << "a crossover above 1: no batched kernel";
}

TEST(GatherPanels, SplitCountsTheTokensThatNeedEachEntry) {
  // 8 tokens x 5 entries: entry 0 needed by all, 1 by none, 2 by one, 3 by four, 4 by two.
  const int64_t batch = 8, n = 5, stride = 7;  // a stride wider than the list
  std::vector<uint8_t> need(batch * stride, 1);  // beyond the list: ignored
  for (int64_t b = 0; b < batch; ++b) {
    uint8_t* row = need.data() + b * stride;
    row[0] = 1;
    row[1] = 0;
    row[2] = b == 5;
    row[3] = b % 2;
    row[4] = b < 2;
  }
  GatherSplit s;
  split_gather(need.data(), stride, n, batch, 0.5, s);
  EXPECT_EQ(s.needing, (std::vector<int32_t>{8, 0, 1, 4, 2}));
  EXPECT_EQ(s.panel, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(s.single, (std::vector<int32_t>{1, 2, 4}));
  split_gather(nullptr, 0, n, batch, 0.5, s);
  EXPECT_EQ(s.panel, (std::vector<int32_t>{0, 1, 2, 3, 4})) << "no mask: every token needs all";
  EXPECT_TRUE(s.single.empty());
}

struct Weights {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

// Rows of `cols` values stored `stride` bytes apart (a bundle's rows lie between other data).
Weights random_weights(DType type, int64_t rows, int64_t cols, uint64_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Weights w;
  w.bytes.assign(stride * rows, 0xff);  // the gaps hold NaN-like bytes no product may read
  std::vector<float> v(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& x : v) x = dist(rng);
    quantize_row(type, v.data(), w.bytes.data() + r * stride, cols);
  }
  w.view = {type, w.bytes.data(), cols, rows, stride};
  return w;
}

// A batch of random activations prepared for weights of `type` (the values kept beside them).
struct Inputs {
  std::vector<float> values;
  std::vector<PreparedInput> prepared;
};

Inputs random_inputs(DType type, int64_t batch, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Inputs in;
  in.values.resize(static_cast<size_t>(batch * cols));
  for (auto& x : in.values) x = dist(rng);
  in.prepared.resize(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    in.prepared[b].prepare_for(best_kernels(), in.values.data() + b * cols, cols, type);
  return in;
}

// Products of every type the gather takes, each row needed by a share of a prompt's tokens
// that runs from none to all: panel rows within rounding of the scalar dot product (their
// kernels sum in another order), single rows and zeros as before.
TEST(GatherPanels, EveryTypeEqualsTheScalarProductWithZerosWhereNotNeeded) {
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_1, DType::IQ4_NL};
  const int64_t cols = 512, rows = 90;
  ThreadPool pool(2);
  for (DType type : types)
    for (int64_t batch : {5, 37}) {
      const Weights w = random_weights(type, rows, cols, row_bytes(type, cols) + 64, 3);
      const Inputs inputs = random_inputs(type, batch, cols, 11);
      const std::vector<PreparedInput>& in = inputs.prepared;
      const std::vector<float>& xs = inputs.values;
      std::mt19937 rng(11);
      std::vector<int32_t> ids;
      for (int32_t r = 1; r < rows; r += 2) ids.push_back(r);  // every other row
      const int64_t n = static_cast<int64_t>(ids.size());
      std::vector<uint8_t> need(batch * n);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      for (int64_t k = 0; k < n; ++k) {
        const double p = static_cast<double>(k % 9) / 8.0;  // 0, 1/8, ..., 1
        for (int64_t b = 0; b < batch; ++b) need[b * n + k] = u(rng) < p;
      }
      std::vector<float> y(batch * n, -1.0f);
      const GatherJob job{&w.view, y.data(), n};
      gather_matmat(best_kernels(), std::span(&job, 1), ids, in, pool, need.data(), n);
      GatherSplit split;
      const DType types[] = {type};
      const BatchForms forms = batch_forms(best_kernels(), in, types);
      split_gather(need.data(), n, n, batch, panel_crossover(type, forms), split);
      ASSERT_FALSE(split.panel.empty()) << dtype_name(type) << ": no row went through a panel";
      std::vector<PreparedInput> scalar_in(1);
      for (int64_t b = 0; b < batch; ++b) {
        scalar_in[0].prepare_for(scalar_kernels(), xs.data() + b * cols, cols, type);
        for (int64_t k = 0; k < n; ++k) {
          const float got = y[b * n + k];
          if (need[b * n + k] == 0) {
            ASSERT_EQ(got, 0.0f) << dtype_name(type) << " token " << b << " entry " << k;
            continue;
          }
          const float want = dot_row(scalar_kernels(), w.view, ids[k], scalar_in[0]);
          ASSERT_NEAR(got, want, 2e-3f * (1.0f + std::fabs(want)))
              << dtype_name(type) << " batch " << batch << " token " << b << " entry " << k;
        }
      }
    }
}

TEST(GatherPanels, ResultsAreTheSameBitsAtAnyThreadCount) {
  for (DType type : {DType::F16, DType::Q4_0, DType::Q4_K}) {
    const int64_t cols = 1024, rows = 300, batch = 24;
    const Weights w = random_weights(type, rows, cols, row_bytes(type, cols), 5);
    const Inputs inputs = random_inputs(type, batch, cols, 2);
    const std::vector<PreparedInput>& in = inputs.prepared;
    std::mt19937 rng(2);
    std::vector<int32_t> ids;
    for (int32_t r = 0; r < rows; ++r) ids.push_back(r);
    std::vector<uint8_t> need(batch * rows);
    std::bernoulli_distribution hot(0.9), cold(0.05);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t k = 0; k < rows; ++k) need[b * rows + k] = k % 3 == 0 ? hot(rng) : cold(rng);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3, 7}) {
      ThreadPool pool(threads);
      std::vector<float> y(batch * rows, -1.0f);
      const GatherJob jobs[2] = {{&w.view, y.data(), rows}, {&w.view, y.data(), rows}};
      gather_matmat(best_kernels(), std::span(jobs, 1), ids, in, pool, need.data(), rows);
      results.push_back(y);
    }
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(results[0], results[i]) << dtype_name(type) << " thread count " << i;
  }
}

}  // namespace
}  // namespace strata
