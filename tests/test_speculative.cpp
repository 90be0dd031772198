// Speculative decoding (generation/speculative.h): prompt-lookup drafts, and the text of a
// speculative generation against plain decoding's, greedy and sampled, on the shipped model.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "generation/speculative.h"
#include "test_helpers.h"

namespace strata {
namespace {

TEST(LookupDraft, TheLongestRecurringSuffixWhereADraftFollowsIt) {
  const std::vector<int32_t> h = {1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 2, 3};
  // "2 3" recurs at 5 and at 1: the most recent place with `max` tokens after it.
  EXPECT_EQ(lookup_draft(h, 2, 4, 2), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(lookup_draft(h, 2, 4, 5), (std::vector<int32_t>{7, 8, 5, 2, 3}));
  EXPECT_EQ(lookup_draft(h, 2, 4, 8), (std::vector<int32_t>{9, 1, 2, 3, 7, 8, 5, 2}));
  EXPECT_EQ(lookup_draft(h, 2, 4, 12), (std::vector<int32_t>{9, 1, 2, 3, 7, 8, 5, 2, 3}));
  // A loop of one token drafts as much of it as asked.
  EXPECT_EQ(lookup_draft(std::vector<int32_t>(10, 4), 2, 4, 5), std::vector<int32_t>(5, 4));
  // A longer suffix wins over a more recent shorter one.
  const std::vector<int32_t> g = {4, 5, 6, 1, 9, 6, 2, 4, 5, 6};
  EXPECT_EQ(lookup_draft(g, 1, 3, 3), (std::vector<int32_t>{1, 9, 6}));
  EXPECT_EQ(lookup_draft(g, 1, 1, 3), (std::vector<int32_t>{2, 4, 5}));  // "6" at 5
  // Nothing recurs, or the n-grams are longer than what recurs.
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{1, 2, 3, 4}, 1, 4, 8).empty());
  EXPECT_TRUE(lookup_draft(h, 3, 4, 8).empty());  // only "2 3" of the suffix recurs
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{7}, 1, 4, 8).empty());
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{}, 1, 4, 8).empty());
  // A suffix recurring only where it overlaps itself still drafts what followed.
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{3, 3, 3}, 1, 2, 4), (std::vector<int32_t>{3}));
}

TEST(DraftBackoff, FailedDraftsWaitLongerEachTimeAndAKeptTokenEndsIt) {
  DraftBackoff b;
  EXPECT_TRUE(draft_now(b));
  int skipped = 0;
  for (const int expected : {1, 2, 4, 8, 16, 16}) {  // each failure in a row doubles the wait
    b = next_backoff(b, 0);
    for (skipped = 0; !draft_now(b); ++skipped) {
    }
    EXPECT_EQ(skipped, expected);
  }
  b = next_backoff(b, 0);
  b = next_backoff(b, 2);  // a kept token: drafts at once again, and a failure waits one step
  EXPECT_TRUE(draft_now(b));
  b = next_backoff(b, 0);
  EXPECT_FALSE(draft_now(b));
  EXPECT_TRUE(draft_now(b));
}

// The tokens after `prompt`: plain decoding (one token a pass) or speculative, same sampler.
struct Decoded {
  std::vector<int32_t> tokens;
  SpeculationStats stats;
  int64_t n_past = 0;
};

Decoded decode_tokens(const Model& m, const std::vector<int32_t>& prompt, int n,
                      const SamplerParams& sp, bool speculative) {
  ThreadPool pool(2);
  Session s(m, 256, pool, {});
  Sampler sampler(sp);
  std::vector<int32_t> history = prompt;
  Decoded d;
  auto logits = s.eval(prompt);
  int32_t next = sampler.sample(logits, history, nullptr);
  history.push_back(next);
  d.tokens.push_back(next);
  if (!speculative) {
    while (static_cast<int>(d.tokens.size()) < n) {
      logits = s.eval(next);
      next = sampler.sample(logits, history, nullptr);
      history.push_back(next);
      d.tokens.push_back(next);
    }
  } else {
    SpeculationParams p;
    p.draft_max = 6;
    LookupDrafter lookup(p.ngram_min, p.ngram_max);
    SpeculativeDecoder spec(s, sampler, nullptr, lookup, p);
    while (static_cast<int>(d.tokens.size()) < n)
      spec.step(history, [&](int32_t t) {
        d.tokens.push_back(t);
        return static_cast<int>(d.tokens.size()) >= n;
      });
    d.stats = spec.stats();
  }
  d.n_past = s.n_past();
  return d;
}

class SpeculativeText : public ::testing::Test {
 protected:
  void SetUp() override {
    model = Model::load(strata::testing::source_file("models/strata-tiny.gguf"));
    // A prompt that says a phrase three times, so the output may repeat it.
    const std::string phrase = "And God said, Let there be light: and there was light. ";
    prompt = model->tokenizer->encode(phrase + phrase + phrase + "And God said,", true);
  }
  std::unique_ptr<Model> model;
  std::vector<int32_t> prompt;
};

TEST_F(SpeculativeText, GreedyTextIsPlainDecodingsAndDraftsAreKept) {
  SamplerParams greedy;
  greedy.temperature = 0;
  const Decoded plain = decode_tokens(*model, prompt, 48, greedy, false);
  const Decoded spec = decode_tokens(*model, prompt, 48, greedy, true);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.steps, 0u);
  EXPECT_GT(spec.stats.accepted, 0u) << "no draft token was kept on a repeating text";
  EXPECT_LE(spec.stats.accepted, spec.stats.drafted);
  // Every token evaluated but the pending last one, as plain decoding leaves it.
  EXPECT_EQ(spec.n_past, plain.n_past);
  // Fewer passes over the weights: each kept draft token had none of its own (the last step may
  // end on a kept token, drawn without its pass).
  const uint64_t passes = spec.stats.steps + spec.stats.plain;
  EXPECT_LT(passes, plain.tokens.size() - 1);
  EXPECT_GE(passes + spec.stats.accepted, plain.tokens.size() - 1);
  EXPECT_LE(passes + spec.stats.accepted, plain.tokens.size());
}

TEST_F(SpeculativeText, SampledTextIsPlainDecodingsForTheSameSeed) {
  for (const uint64_t seed : {1u, 7u, 42u}) {
    SamplerParams sp;
    sp.temperature = 0.8f;
    sp.seed = seed;
    const Decoded plain = decode_tokens(*model, prompt, 40, sp, false);
    const Decoded spec = decode_tokens(*model, prompt, 40, sp, true);
    EXPECT_EQ(spec.tokens, plain.tokens) << "seed " << seed;
    EXPECT_EQ(spec.n_past, plain.n_past) << "seed " << seed;
  }
}

TEST(SpeculativeDecoder, RefusesDraftLimitsThatCannotHold) {
  auto m = Model::load(strata::testing::source_file("models/strata-tiny.gguf"));
  ThreadPool pool(1);
  Session s(*m, 16, pool, {});
  Sampler sampler({});
  LookupDrafter lookup(2, 4);
  SpeculationParams p;
  p.draft_min = 5, p.draft_max = 4;
  EXPECT_THROW(SpeculativeDecoder(s, sampler, nullptr, lookup, p), Error);
  p = {};
  p.ngram_min = 0;
  EXPECT_THROW(SpeculativeDecoder(s, sampler, nullptr, lookup, p), Error);
  p = {};
  p.p_min = 1.5f;
  EXPECT_THROW(SpeculativeDecoder(s, sampler, nullptr, lookup, p), Error);
  EXPECT_THROW(LookupDrafter(3, 2), Error);
}

}  // namespace
}  // namespace strata
