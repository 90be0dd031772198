// Speculative decoding with a draft model (generation/drafter.h): the draft's choice, the
// vocabulary check, budgets shared with the target, and on the shipped model with its own Q4_0
// copy as the draft: greedy and sampled text equal to plain decoding's, drafts of several slots
// in one batch, and the accepted tokens' distribution against the target's (a chi-square test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "generation/generator.h"
#include "generation/speculative.h"
#include "offline/quantize.h"
#include "planning/shared_budgets.h"
#include "split_testing.h"
#include "test_helpers.h"

namespace strata {
namespace {

TEST(DraftChoice, TheMostLikelyTokenAndItsShareOfTheTopTen) {
  const std::vector<float> four = {0.0f, 2.0f, 1.0f, 2.0f};
  const DraftChoice c = draft_choice(four);
  EXPECT_EQ(c.token, 1);  // equal logits: the lower id
  const double sum = std::exp(-2.0) + 1 + std::exp(-1.0) + 1;
  EXPECT_NEAR(c.p, 1.0 / sum, 1e-6);
  // Only the ten most likely count: twelve values, the two smallest left out.
  std::vector<float> twelve(12, 0.0f);
  twelve[5] = 3.0f;
  twelve[0] = twelve[11] = -50.0f;
  const DraftChoice d = draft_choice(twelve);
  EXPECT_EQ(d.token, 5);
  EXPECT_NEAR(d.p, std::exp(3.0) / (std::exp(3.0) + 9), 1e-6);
  EXPECT_EQ(draft_choice(std::vector<float>{}).token, -1);
}

std::unique_ptr<Tokenizer> tokenizer_of(const std::string& path) {
  return Tokenizer::from_gguf(*GgufFile::open(path));
}

TEST(DraftVocab, OnlyTheSameVocabularyDrafts) {
  const auto tiny = tokenizer_of(strata::testing::source_file("models/strata-tiny.gguf"));
  const auto gpt2 = tokenizer_of(strata::testing::data_file("gpt2-tokenizer.gguf"));
  const auto spm = tokenizer_of(strata::testing::data_file("spm-tokenizer.gguf"));
  EXPECT_EQ(draft_vocab_mismatch(*tiny, *tiny), "");
  EXPECT_EQ(draft_vocab_mismatch(*gpt2, *gpt2), "");
  for (const Tokenizer* other : {gpt2.get(), spm.get()}) {
    if (std::string(other->kind()) == tiny->kind()) continue;
    const std::string why = draft_vocab_mismatch(*tiny, *other);
    EXPECT_NE(why.find(other->kind()), std::string::npos) << why;
  }
  const std::string why = draft_vocab_mismatch(*gpt2, *spm);
  EXPECT_FALSE(why.empty());
}

TEST(BudgetsBeside, WhatTheDraftHoldsComesOffEachGivenBudget) {
  PlanPrediction held;
  held.ram_bytes = 300, held.vram_bytes = 50;
  const Budgets left = budgets_beside({1000, 0}, held, "the draft");
  EXPECT_EQ(left.ram, 700u);
  EXPECT_EQ(left.vram, 0u);  // none given stays none
  EXPECT_EQ(budgets_beside({1000, 60}, held, "the draft").vram, 10u);
  try {
    budgets_beside({300, 0}, held, "the draft model 'd.gguf'");
    ADD_FAILURE() << "a draft holding the whole budget was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the draft model 'd.gguf'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--ram-budget"), std::string::npos);
  }
}

// The shipped model and its Q4_0 copy, made once for the suite.
class DraftModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    draft_path = new std::string(strata::testing::temp_file("draft_q4_0.gguf"));
    QuantizeOptions o;
    o.input = strata::testing::source_file("models/strata-tiny.gguf");
    o.output = *draft_path;
    o.recipe = QuantRecipe::Q4_0;
    o.pure = true;
    quantize_model(o);
  }
  static void TearDownTestSuite() {
    std::remove(draft_path->c_str());
    delete draft_path;
  }
  void SetUp() override {
    target = Model::load(strata::testing::source_file("models/strata-tiny.gguf"));
    draft = Model::load(*draft_path);
    const std::string phrase = "And God said, Let there be light: and there was light. ";
    prompt = target->tokenizer->encode(phrase + "And God", true);
  }

  struct Decoded {
    std::vector<int32_t> tokens;
    SpeculationStats stats;
  };
  // n tokens after the prompt: plain (one a pass) or with the draft model drafting.
  Decoded decode(const SamplerParams& sp, int n, bool speculative, float p_min = 0.0f) {
    ThreadPool pool(2);
    Session s(*target, 256, pool, {});
    Session d(*draft, 256, pool, {});
    ModelDrafter drafter(d, target->tokenizer->n_vocab(), p_min);
    Sampler sampler(sp);
    std::vector<int32_t> history = prompt;
    Decoded out;
    auto logits = s.eval(prompt);
    history.push_back(sampler.sample(logits, history, nullptr));
    out.tokens.push_back(history.back());
    SpeculationParams p;
    p.draft_max = 5;
    SpeculativeDecoder spec(s, sampler, nullptr, drafter, p);
    while (static_cast<int>(out.tokens.size()) < n) {
      if (!speculative) {
        logits = s.eval(history.back());
        history.push_back(sampler.sample(logits, history, nullptr));
        out.tokens.push_back(history.back());
        continue;
      }
      spec.step(history, [&](int32_t t) {
        out.tokens.push_back(t);
        return static_cast<int>(out.tokens.size()) >= n;
      });
    }
    out.stats = spec.stats();
    return out;
  }

  static std::string* draft_path;
  std::unique_ptr<Model> target, draft;
  std::vector<int32_t> prompt;
};
std::string* DraftModel::draft_path = nullptr;

TEST_F(DraftModel, GreedyTextIsPlainDecodingsAndMostDraftsAreKept) {
  SamplerParams greedy;
  greedy.temperature = 0;
  const Decoded plain = decode(greedy, 40, false);
  const Decoded spec = decode(greedy, 40, true);
  EXPECT_EQ(spec.tokens, plain.tokens);
  // Its own Q4_0 copy agrees with the model on most greedy tokens.
  EXPECT_GT(spec.stats.acceptance(), 0.5) << spec.stats.accepted << " of " << spec.stats.drafted;
  // A confident draft (p_min) drafts no more tokens than one drafting whatever it thinks.
  const Decoded confident = decode(greedy, 40, true, 0.9f);
  EXPECT_EQ(confident.tokens, plain.tokens);
  EXPECT_LE(confident.stats.drafted, spec.stats.drafted);
}

TEST_F(DraftModel, SampledTextIsPlainDecodingsForTheSameSeed) {
  for (const uint64_t seed : {3u, 11u}) {
    SamplerParams sp;
    sp.temperature = 0.9f;
    sp.seed = seed;
    EXPECT_EQ(decode(sp, 32, true).tokens, decode(sp, 32, false).tokens) << "seed " << seed;
  }
}

TEST_F(DraftModel, SlotsDraftedInOneBatchGetTheirOwnDrafts) {
  ThreadPool pool(2);
  SessionOptions two;
  two.n_seq = 2;
  Session together(*draft, 128, pool, two);
  ModelDrafter both(together, target->tokenizer->n_vocab(), 0.0f);
  const std::vector<int32_t> other = target->tokenizer->encode("In the beginning God", true);
  std::vector<int32_t> a, b;
  const DraftRequest requests[] = {{0, prompt, 4, &a}, {1, other, 6, &b}};
  both.draft(requests);
  for (const DraftRequest& r : requests) {
    Session alone(*draft, 128, pool, {});
    ModelDrafter one(alone, target->tokenizer->n_vocab(), 0.0f);
    EXPECT_EQ(one.draft_one(r.history, r.max), *r.out);
    EXPECT_EQ(static_cast<int>(r.out->size()), r.max);  // p_min 0: as many as asked
  }
  // The next call reuses what the slots hold: a history one token longer costs one pass per
  // drafted token, not its whole prompt again.
  std::vector<int32_t> longer = prompt;
  longer.push_back(a[0]);
  const uint64_t before = together.tokens_evaluated();
  std::vector<int32_t> c;
  const DraftRequest again[] = {{0, longer, 3, &c}};
  both.draft(again);
  EXPECT_EQ(std::vector<int32_t>(a.begin() + 1, a.begin() + 4), c);
  EXPECT_LE(together.tokens_evaluated() - before, 3u);
}

// chat's replies: a generator that drafts gives each turn the reply of one that does not, and
// reuses what its session holds from the turn before.
TEST_F(DraftModel, GeneratorRepliesAreThoseWithoutDrafts) {
  ThreadPool pool(2);
  Session plain_session(*target, 256, pool, {}), spec_session(*target, 256, pool, {});
  Session draft_session(*draft, 256, pool, {});
  ModelDrafter drafter(draft_session, target->tokenizer->n_vocab(), 0.2f);
  Generator plain(*target, plain_session), spec(*target, spec_session);
  SpeculationParams p;
  p.draft_max = 4;
  spec.set_speculation(&drafter, p);
  std::vector<int32_t> turn = prompt;
  for (const float temperature : {0.0f, 0.7f}) {
    GenerationParams g;
    g.max_tokens = 30;
    g.sampling.temperature = temperature;
    g.sampling.seed = 9;
    const GenerationResult a = plain.generate(turn, g), b = spec.generate(turn, g);
    EXPECT_EQ(b.text, a.text) << "temperature " << temperature;
    EXPECT_EQ(b.completion_tokens, a.completion_tokens);
    EXPECT_EQ(b.cached_tokens, a.cached_tokens);
    EXPECT_GT(b.draft_tokens, 0);
    const auto reply = target->tokenizer->encode(a.text + " And", false);
    turn.insert(turn.end(), reply.begin(), reply.end());
  }
  EXPECT_GT(spec.speculation_stats().accepted, 0u);
}

// An early exit of the model itself drafts (--draft-layers): its logits are not the model's,
// and the text is still plain decoding's.
TEST_F(DraftModel, TheModelsFirstLayersDraftAndTheTextIsPlainDecodings) {
  ThreadPool pool(2);
  SessionOptions early;
  early.exit_layer = 3;
  Session whole(*target, 256, pool, {}), exit3(*target, 256, pool, early);
  const auto a = whole.eval(prompt);
  const std::vector<float> full(a.begin(), a.end());
  const auto b = exit3.eval(prompt);
  EXPECT_GT(strata::testing::relative_difference(full, {b.begin(), b.end()}), 1e-2);
  for (const float temperature : {0.0f, 0.8f}) {
    Session s(*target, 256, pool, {}), d(*target, 256, pool, early), p(*target, 256, pool, {});
    ModelDrafter drafter(d, target->tokenizer->n_vocab(), 0.0f);
    SamplerParams sp;
    sp.temperature = temperature;
    sp.seed = 4;
    Sampler plain_sampler(sp), spec_sampler(sp);
    std::vector<int32_t> plain = prompt, spec = prompt;
    plain.push_back(plain_sampler.sample(p.eval(prompt), plain));
    spec.push_back(spec_sampler.sample(s.eval(prompt), spec));
    while (plain.size() < prompt.size() + 30)
      plain.push_back(plain_sampler.sample(p.eval(plain.back()), plain));
    SpeculationParams params;
    params.draft_max = 3;
    SpeculativeDecoder decoder(s, spec_sampler, nullptr, drafter, params);
    while (spec.size() < plain.size())
      decoder.step(spec, [&](int32_t) { return spec.size() >= plain.size(); });
    EXPECT_EQ(spec, plain) << "temperature " << temperature;
    EXPECT_GT(decoder.stats().accepted, 0u);
  }
}

// Greedy tokens after `prompt` on a session of `m` with `o`, plain or drafted by `drafter`;
// bytes read from flash go to `flash_bytes`.
std::vector<int32_t> greedy_tokens(const Model& m, Backend& backend, const SessionOptions& o,
                                   const std::vector<int32_t>& prompt, size_t n, Drafter* drafter,
                                   uint64_t& flash_bytes, SpeculationStats* stats = nullptr) {
  Session s(m, 64, backend, o);
  SamplerParams sp;
  sp.temperature = 0;
  Sampler sampler(sp);
  std::vector<int32_t> h = prompt;
  h.push_back(sampler.sample(s.eval(prompt), h));
  SpeculationParams params;
  params.draft_max = 4;
  std::optional<SpeculativeDecoder> spec;
  if (drafter) spec.emplace(s, sampler, nullptr, *drafter, params);
  while (h.size() < prompt.size() + n) {
    if (spec)
      spec->step(h, [&](int32_t) { return h.size() >= prompt.size() + n; });
    else
      h.push_back(sampler.sample(s.eval(h.back()), h));
  }
  flash_bytes = s.flash_stats().bytes_read;
  if (stats && spec) *stats = spec->stats();
  return {h.begin() + static_cast<std::ptrdiff_t>(prompt.size()), h.end()};
}

// Verification on the sparse, split and expert paths: a model drafting for itself (its dense
// copy in RAM: every draft kept, so whole batches are verified) gives its plain greedy tokens in
// predict mode in RAM, from flash (the batch's union of neurons read once: fewer bytes than
// token by token), split between the reference device and the CPU (PowerInfer's hybrid, as
// planned under a VRAM budget) and as a mixture of experts. Q8_0: a batch's rows are one
// token's bit for bit.
TEST(SpeculativePaths, EveryPathGivesItsPlainTokens) {
  const std::string sparse =
      strata::testing::sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 9);
  const std::string moe = strata::testing::tiny_moe_model(DType::Q8_0);
  struct Path {
    const char* name;
    std::string file, draft_file;
    SessionOptions options;
  };
  SessionOptions predict{FfnMode::Predict}, flash{FfnMode::Predict};
  flash.cache_neurons = 96;
  const Path paths[] = {{"predict", sparse, sparse, predict},
                        {"flash", strata::testing::bundled_model(sparse), sparse, flash},
                        {"experts", moe, moe, {}}};
  ThreadPool pool(2);
  CpuBackend cpu(pool);
  for (const Path& path : paths) {
    auto m = Model::load(path.file, false);
    if (path.options.ffn != FfnMode::Dense && !m->weights.bundled) m->ensure_down_t();
    const auto draft_model = Model::load(path.draft_file, false);
    const auto prompt = strata::testing::random_tokens(*m, 12, 5);
    uint64_t plain_bytes = 0, spec_bytes = 0;
    const auto plain = greedy_tokens(*m, cpu, path.options, prompt, 24, nullptr, plain_bytes);
    Session d(*draft_model, 64, pool, {});
    ModelDrafter drafter(d, m->config.n_vocab, 0.0f);
    SpeculationStats stats;
    EXPECT_EQ(greedy_tokens(*m, cpu, path.options, prompt, 24, &drafter, spec_bytes, &stats), plain)
        << path.name;
    EXPECT_GT(stats.acceptance(), 0.9) << path.name << ": its own dense copy drafts";
    if (m->weights.bundled) {
      EXPECT_LT(spec_bytes, plain_bytes) << "a verified batch reads the union of its neurons once";
      EXPECT_GT(spec_bytes, 0u);
    }
  }
}

TEST(SpeculativePaths, ASplitFfnGivesItsPlainTokens) {
  auto m =
      Model::load(strata::testing::sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 9), false);
  const auto draft_model =
      Model::load(strata::testing::sparse_tiny_model(DType::Q8_0, FfnActivation::ReGLU, 9), false);
  RunRequest r = split_testing::on_reference();
  const split_testing::DeviceSizes size = split_testing::device_sizes(*m);
  r.device.vram_budget = (size.whole + size.dense) / 2;
  PlannedRun planned = plan_run(*m, r);
  ASSERT_TRUE(planned.device.split);
  ThreadPool pool(2);
  auto device = make_session_backend(planned, pool);
  const auto prompt = strata::testing::random_tokens(*m, 12, 5);
  uint64_t bytes = 0;
  const auto plain = greedy_tokens(*m, *device, planned.session, prompt, 24, nullptr, bytes);
  Session d(*draft_model, 64, pool, {});
  ModelDrafter drafter(d, m->config.n_vocab, 0.0f);
  SpeculationStats stats;
  EXPECT_EQ(greedy_tokens(*m, *device, planned.session, prompt, 24, &drafter, bytes, &stats),
            plain);
  EXPECT_GT(stats.acceptance(), 0.9);
}

// Pearson's statistic of `counts` against probabilities `p` (of n draws): tokens expected at
// least 10 times are bins of their own, the rest one bin. Sets `bins`.
double chi_square(const std::map<int32_t, int>& counts, const std::vector<double>& p, int n,
                  int& bins) {
  double stat = 0, rest_expected = 0;
  int rest_seen = 0;
  bins = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    const double expected = p[t] * n;
    const auto it = counts.find(static_cast<int32_t>(t));
    const int seen = it == counts.end() ? 0 : it->second;
    if (expected < 10) {
      rest_expected += expected;
      rest_seen += seen;
      continue;
    }
    stat += (seen - expected) * (seen - expected) / expected;
    ++bins;
  }
  if (rest_expected > 0) {
    stat += (rest_seen - rest_expected) * (rest_seen - rest_expected) / rest_expected;
    ++bins;
  }
  return stat;
}

// Chi-square's 0.9999 quantile with k degrees of freedom (Wilson and Hilferty's approximation:
// 16.2 at k = 1 against the exact 15.1, 36.0 against 35.6 at 10, 67.9 against 66.6 at 30).
double chi_square_quantile_9999(int k) {
  const double z = 3.719, a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

// The target's distribution after `tokens` at temperature t (no top-k/top-p/min-p), computed
// apart from the sampler: a softmax of one token-at-a-time logits.
std::vector<double> target_distribution(const Model& m, const std::vector<int32_t>& tokens,
                                        float t) {
  ThreadPool pool(2);
  Session s(m, 256, pool, {});
  const auto logits = s.eval(tokens);
  const float max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / t);
  for (double& v : p) v /= sum;
  return p;
}

// Over many seeds, the token after the pending one (the target's draw at the batch's first row)
// and, where the draft's first token was kept, the next one (drawn from the batch's second row:
// what a kept draft token's position gives) follow the target's distributions.
TEST_F(DraftModel, AcceptedTokensFollowTheTargetsDistribution) {
  constexpr float kTemperature = 1.5f;
  constexpr int kDraws = 600;
  ThreadPool pool(2);
  Session s(*target, 256, pool, {});
  Session d(*draft, 256, pool, {});
  ModelDrafter drafter(d, target->tokenizer->n_vocab(), 0.0f);
  std::vector<int32_t> pending = prompt;
  pending.push_back(target->tokenizer->encode(" said", false).at(0));
  const std::vector<int32_t> draft = drafter.draft_one(pending, 3);
  ASSERT_EQ(draft.size(), 3u);
  std::map<int32_t, int> first, second;
  int kept = 0;
  s.eval(prompt);
  for (int seed = 0; seed < kDraws; ++seed) {
    SamplerParams sp;
    sp.temperature = kTemperature;
    sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0.0f;
    sp.seed = static_cast<uint64_t>(seed);
    Sampler sampler(sp);
    SpeculationParams p;
    p.draft_max = 3;
    SpeculativeDecoder spec(s, sampler, nullptr, drafter, p);
    std::vector<int32_t> history = pending;
    int drawn = 0;
    spec.step(history, [&](int32_t t) {
      (drawn == 0 ? first : second)[t]++;
      ++drawn;
      return drawn == 2;
    });
    if (drawn == 2) ++kept;
    s.truncate(static_cast<int64_t>(prompt.size()));
  }
  int bins = 0;
  const double stat_first =
      chi_square(first, target_distribution(*target, pending, kTemperature), kDraws, bins);
  EXPECT_LT(stat_first, chi_square_quantile_9999(bins - 1)) << bins << " bins";
  EXPECT_GE(bins, 3);
  std::vector<int32_t> after = pending;
  after.push_back(draft[0]);
  ASSERT_GT(kept, 100) << "too few kept drafts to test the next token";
  const double stat_second =
      chi_square(second, target_distribution(*target, after, kTemperature), kept, bins);
  EXPECT_LT(stat_second, chi_square_quantile_9999(bins - 1))
      << bins << " bins, " << kept << " kept";
}

}  // namespace
}  // namespace strata
