// llama-perplexity's KL divergence: its packed log-probability rows, the statistics of one
// prediction against a double-precision computation, and its file, refused when damaged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "core/error.h"
#include "generation/kl_divergence.h"
#include "generation/log_prob_file.h"
#include "test_helpers.h"

namespace strata {
namespace {
using testing::temp_file;

std::vector<float> random_logits(int64_t n, float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> log_softmax(const std::vector<float>& l) {
  double max = l[0], sum = 0;
  for (float x : l) max = std::max(max, double{x});
  for (float x : l) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : l) out.push_back(x - max - std::log(sum));
  return out;
}

std::vector<uint16_t> packed(const std::vector<float>& logits) {
  std::vector<uint16_t> row(packed_log_prob_row_size(static_cast<int64_t>(logits.size())));
  pack_log_probs(logits, 0, row);
  return row;
}

TEST(KlDivergence, PackedRowsHoldEachLogProbabilityWithinHalfAStep) {
  const auto logits = random_logits(1001, 5.0f, 1);  // an odd vocabulary: the row is padded
  std::vector<uint16_t> row(packed_log_prob_row_size(1001));
  ASSERT_EQ(row.size(), 1006u);
  const auto exact = log_softmax(logits);
  const double nll = pack_log_probs(logits, 7, row);
  EXPECT_NEAR(nll, -exact[7], 1e-5);
  const double max = *std::max_element(exact.begin(), exact.end());
  const double step = 16.0 / 65535.0;  // the spread exceeds 16: the stored range is 16
  int below = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double got = packed_log_prob(row, static_cast<int64_t>(i));
    if (exact[i] > max - 16) {
      EXPECT_NEAR(got, exact[i], step / 2 + 1e-5) << i;
    } else {
      EXPECT_NEAR(got, max - 16, 1e-4) << i;  // stored as the floor
      ++below;
    }
  }
  EXPECT_GT(below, 0);  // the test covers the floor
}

TEST(KlDivergence, OnePredictionEqualsTheDoublePrecisionDefinition) {
  const auto base = random_logits(500, 1.5f, 2);  // spread well under 16: nothing floored
  auto model = base;
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0, 0.3f);
  for (auto& x : model) x += noise(rng);
  const int32_t next = 42;
  const auto row = packed(base);
  const KlPrediction p = kl_prediction(model, row, next);

  const auto lp = log_softmax(base), lq = log_softmax(model);
  double kld = 0;
  for (size_t i = 0; i < lp.size(); ++i) kld += std::exp(lp[i]) * (lp[i] - lq[i]);
  EXPECT_GT(kld, 0.01);
  EXPECT_NEAR(p.kld, kld, 1e-3 * kld + 1e-5);
  EXPECT_NEAR(p.nll, -lq[next], 1e-5);
  EXPECT_NEAR(p.nll_base, -lp[next], 2e-4);
  EXPECT_NEAR(p.p_diff, std::exp(lq[next]) - std::exp(lp[next]), 1e-5);
  const auto top = [](const std::vector<double>& v) {
    return std::max_element(v.begin(), v.end()) - v.begin();
  };
  EXPECT_EQ(p.same_top, top(lp) == top(lq));
  // Against itself: no divergence beyond the packing, the same top token.
  const KlPrediction self = kl_prediction(base, row, next);
  EXPECT_NEAR(self.kld, 0, 1e-5);
  EXPECT_TRUE(self.same_top);
}

TEST(KlDivergence, SummaryMeansUncertaintiesAndPercentiles) {
  KlAccumulator acc;
  for (int i = 1; i <= 100; ++i)
    acc.add({.kld = i * 0.01,
             .nll = 2.0 + (i % 2) * 0.2,
             .nll_base = 2.0,
             .p_diff = 0.0,
             .same_top = i <= 75});
  const KlSummary s = acc.summary();
  EXPECT_EQ(s.predictions, 100);
  EXPECT_NEAR(s.kld.value, 0.505, 1e-12);
  // Standard error of the mean of 0.01..1.00: sample sd sqrt(var*n/(n-1)) / sqrt(n).
  const double var = 0.01 * 0.01 * (100.0 * 100.0 - 1) / 12;  // population variance
  EXPECT_NEAR(s.kld.uncertainty, std::sqrt(var / 99), 1e-9);
  EXPECT_NEAR(s.same_top.value, 0.75, 1e-12);
  EXPECT_NEAR(s.same_top.uncertainty, std::sqrt(0.75 * 0.25 / 99), 1e-12);
  EXPECT_NEAR(s.ppl_base.value, std::exp(2.0), 1e-9);
  EXPECT_NEAR(s.ln_ppl_ratio.value, 0.1, 1e-9);
  EXPECT_NEAR(s.ppl_ratio.value, std::exp(0.1), 1e-9);
  ASSERT_EQ(s.kld_quantiles.size(), std::size(kQuantiles));
  EXPECT_NEAR(s.kld_quantiles.front(), 1.0, 1e-6);  // maximum
  EXPECT_NEAR(s.kld_quantiles.back(), 0.01, 1e-6);  // minimum
  EXPECT_NEAR(s.kld_quantiles[6], 0.505, 1e-6);     // median of an even count: the mean of two
  const std::vector<float> sorted = {1, 2, 4};
  EXPECT_DOUBLE_EQ(percentile(sorted, 0.25), 1.5);
  EXPECT_DOUBLE_EQ(percentile(sorted, 0.75), 3.0);
}

std::string write_base(const std::string& name, int64_t n_vocab, int64_t n_ctx, int64_t windows) {
  const std::string path = temp_file(name);
  std::vector<int32_t> tokens(n_ctx * windows);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % n_vocab);
  LogProbFileWriter w(path, {n_ctx, n_vocab, windows, tokens});
  for (int64_t r = 0; r < windows * scored_per_window(n_ctx); ++r)
    w.write_row(random_logits(n_vocab, 2.0f, static_cast<uint32_t>(r)), 1);
  w.finish();
  return path;
}

TEST(KlDivergence, FilesRoundTripAndDamagedOnesAreRefused) {
  const std::string path = write_base("base.kld", 11, 8, 2);
  {
    LogProbFileReader r(path, 11);
    EXPECT_EQ(r.header().n_ctx, 8);
    EXPECT_EQ(r.header().n_chunk, 2);
    ASSERT_EQ(r.header().tokens.size(), 16u);
    EXPECT_EQ(r.header().tokens[12], 1);
    const auto expected = packed(random_logits(11, 2.0f, 0));
    const auto first = r.next_row();
    EXPECT_TRUE(std::equal(first.begin(), first.end(), expected.begin(), expected.end()));
    for (int i = 1; i < 2 * scored_per_window(8); ++i) r.next_row();
    EXPECT_THROW(r.next_row(), Error);  // past the last row
  }
  const auto refused = [](const std::string& file, int64_t n_vocab, const char* words) {
    try {
      LogProbFileReader r(file, n_vocab);
      ADD_FAILURE() << "accepted " << file;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(path, 12, "over 11 tokens, the model has 12");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto damaged = [&](const std::string& name, const std::string& content) {
    const std::string p = temp_file(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  refused(damaged("short.kld", bytes.substr(0, bytes.size() - 2)), 11, "bytes where");
  refused(damaged("magic.kld", "_logitz_" + bytes.substr(8)), 11, "no \"_logits_\"");
  std::string bad_token = bytes;
  bad_token[20] = 99;  // the first token id
  refused(damaged("token.kld", bad_token), 11, "outside the vocabulary");
  std::string huge = bytes;
  huge[8 + 3] = 0x7f;  // n_ctx beyond any window
  refused(damaged("ctx.kld", huge), 11, "out of range");
  std::string bad_scale = bytes;
  const size_t first_row = 20 + 16 * 4;
  bad_scale[first_row + 3] = static_cast<char>(0xff);  // scale: NaN
  bad_scale[first_row + 2] = static_cast<char>(0xff);
  LogProbFileReader r(damaged("scale.kld", bad_scale), 11);
  EXPECT_THROW(r.next_row(), Error);
}

}  // namespace
}  // namespace strata
