// llama.cpp's context shift (--context-shift, --keep): which tokens stay, and that generation
// after a shift sees exactly what a fresh run on the remaining tokens sees.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "generation/context_shift.h"
#include "model/model.h"
#include "runtime/session.h"

namespace strata {
namespace {

TEST(ContextShift, KeepCountsPromptTokensAfterBosAsLlamaCpp) {
  EXPECT_EQ(tokens_kept(0, 10, true), 1);    // BOS always stays
  EXPECT_EQ(tokens_kept(0, 10, false), 0);
  EXPECT_EQ(tokens_kept(4, 10, true), 5);
  EXPECT_EQ(tokens_kept(4, 10, false), 4);
  EXPECT_EQ(tokens_kept(-1, 10, true), 10);  // the whole prompt
  EXPECT_EQ(tokens_kept(50, 10, true), 10);  // at most the prompt
  EXPECT_EQ(tokens_kept(10, 10, true), 10);
}

TEST(ContextShift, DropsTheOlderHalfOfWhatFollowsTheKeptTokens) {
  ContextShift s = plan_context_shift(256, 5);
  EXPECT_EQ(s.keep, 5);
  EXPECT_EQ(s.discard, 125);  // (256 - 5) / 2, rounded down as llama.cpp's n_discard
  s = plan_context_shift(256, 0);
  EXPECT_EQ(s.discard, 128);
  s = plan_context_shift(256, 255);
  EXPECT_EQ(s.discard, 0);  // nothing can go
  s = plan_context_shift(256, 400);
  EXPECT_EQ(s.keep, 256);
  EXPECT_EQ(s.discard, 0);
}

TEST(ContextShift, AfterAShiftTheLogitsAreThoseOfAFreshRunOnWhatRemains) {
  const auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  ThreadPool pool(2);
  constexpr int64_t kCtx = 32;
  std::vector<int32_t> tokens = m->tokenizer->encode(
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters.",
      true);
  ASSERT_GT(static_cast<int64_t>(tokens.size()), kCtx);
  const int32_t next = tokens[kCtx];
  tokens.resize(kCtx);
  Session shifted(*m, kCtx, pool);
  shifted.eval(std::span<const int32_t>(tokens));
  ASSERT_EQ(shifted.n_past(), kCtx);

  std::vector<int32_t> in_context = tokens;
  const ContextShift shift = plan_context_shift(kCtx, 4);
  const auto after = shift_context(shifted, in_context, shift, next);
  const std::vector<float> got(after.begin(), after.end());

  std::vector<int32_t> remaining(tokens.begin(), tokens.begin() + 4);
  remaining.insert(remaining.end(), tokens.begin() + 4 + shift.discard, tokens.end());
  remaining.push_back(next);
  EXPECT_EQ(in_context, remaining);
  EXPECT_EQ(shifted.n_past(), static_cast<int64_t>(remaining.size()));
  Session fresh(*m, kCtx, pool);
  const auto want = fresh.eval(std::span<const int32_t>(remaining));
  float max_abs = 0;
  for (float v : want) max_abs = std::max(max_abs, std::fabs(v));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * max_abs) << i;
  // The dropped tokens mattered: the full context gives other logits.
  Session full(*m, kCtx + 1, pool);
  std::vector<int32_t> all = tokens;
  all.push_back(next);
  const auto unshifted = full.eval(std::span<const int32_t>(all));
  EXPECT_NE(got, std::vector<float>(unshifted.begin(), unshifted.end()));
}

TEST(ContextShift, AShiftThatDropsNothingIsRefused) {
  const auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  ThreadPool pool(1);
  Session s(*m, 8, pool);
  std::vector<int32_t> tokens(8, 5);
  s.eval(std::span<const int32_t>(tokens));
  EXPECT_THROW(shift_context(s, tokens, plan_context_shift(8, 7), 5), Error);
  EXPECT_EQ(s.n_past(), 8);  // untouched
}

}  // namespace
}  // namespace strata
