// Continuous batching: the policy (slot choice, prompt chunks) and the scheduler against the
// one-sequence generator: a sequence decoded in a batch with others gives what it gives alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "generation/batch_scheduler.h"
#include "generation/pooling.h"
#include "generation/slot_context.h"
#include "offline/quantize.h"
#include "server_fixture.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::greedy;
using strata::testing::shipped_model;
using strata::testing::temp_file;

TEST(SlotPolicy, LongestSharedPrefixAmongFreeSlotsThenFewestCachedTokens) {
  const std::vector<std::vector<int32_t>> cached = {{1, 2, 3, 4}, {1, 2, 9}, {}, {1, 2, 3, 4, 5}};
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6};
  SlotChoice c = pick_slot(cached, {true, true, true, true}, prompt);
  EXPECT_EQ(c.slot, 3);
  EXPECT_EQ(c.keep, 5);
  c = pick_slot(cached, {true, true, true, false}, prompt);  // slot 3 busy
  EXPECT_EQ(c.slot, 0);
  EXPECT_EQ(c.keep, 4);
  // Nothing shared: the empty slot (nothing lost) before the others.
  c = pick_slot(cached, {true, true, true, true}, std::vector<int32_t>{7, 8});
  EXPECT_EQ(c.slot, 2);
  EXPECT_EQ(c.keep, 0);
  // The last prompt token is evaluated again for its logits, even when all of it is cached.
  c = pick_slot(cached, {true, false, false, false}, std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(c.slot, 0);
  EXPECT_EQ(c.keep, 3);
  EXPECT_EQ(pick_slot(cached, {false, false, false, false}, prompt).slot, -1);
}

TEST(SlotPolicy, DefaultSlotContextIsTheModelsUnlessTheKvCacheWouldNotFit) {
  const uint64_t gib = uint64_t{1} << 30, mib = uint64_t{1} << 20;
  // 7B, F32 cache: 1 MiB per position. 64 GiB: 4 slots of 4096 (16 GiB) fit in half.
  EXPECT_EQ(default_slot_context(4096, 4, mib, 64 * gib), 4096);
  // 16 GiB: half is 8 GiB, 2048 positions per slot.
  EXPECT_EQ(default_slot_context(4096, 4, mib, 16 * gib), 2048);
  // Never below 256 (the plan then says what does not fit), nor above 4096 or the model's.
  EXPECT_EQ(default_slot_context(4096, 64, mib, gib), 256);
  EXPECT_EQ(default_slot_context(32768, 1, 1024, 64 * gib), 4096);
  EXPECT_EQ(default_slot_context(128, 8, mib, mib), 128);
  EXPECT_EQ(default_slot_context(0, 2, 0, 0), 4096);
}

TEST(SlotPolicy, ARunsContextIsTheAskedOrTheModelsCappedAt4096) {
  // One rule for run, chat, plan and serve: a plan sizes the KV cache the run will hold.
  EXPECT_EQ(run_context(512, 256), 512);
  EXPECT_EQ(run_context(0, 256), 256);
  EXPECT_EQ(run_context(0, 131072), 4096);
  EXPECT_EQ(run_context(0, 0), 4096);
  EXPECT_EQ(run_context(8192, 131072), 8192);
}

TEST(SlotPolicy, PromptChunksFillTheStepFirstComeFirstServed) {
  EXPECT_EQ(prompt_chunks(0, std::vector<int64_t>{100, 10}, 64, 16), (std::vector<int64_t>{64, 0}));
  EXPECT_EQ(prompt_chunks(10, std::vector<int64_t>{30, 40}, 64, 16),
            (std::vector<int64_t>{30, 24}));
  // Decoding fills the step: prompts still advance by the minimum chunk.
  EXPECT_EQ(prompt_chunks(64, std::vector<int64_t>{30, 40}, 64, 16), (std::vector<int64_t>{16, 0}));
  EXPECT_EQ(prompt_chunks(3, std::vector<int64_t>{}, 64, 16), std::vector<int64_t>{});
}

// The shipped model as it is (F16) or quantized with every tensor in one type.
std::string shipped_as(QuantRecipe recipe, const char* name) {
  const std::string out = temp_file(std::string("shipped_") + name + ".gguf");
  QuantizeOptions o;
  o.input = shipped_model();
  o.output = out;
  o.recipe = recipe;
  o.pure = true;
  quantize_model(o);
  return out;
}

std::vector<std::vector<int32_t>> test_prompts(const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text :
       {"In the beginning", "And God said", "The earth was without form, and void, and darkness",
        "Let there be light", "And the evening and the morning were the first day", "He",
        "And God called the light Day, and the darkness he called Night"})
    prompts.push_back(tok.encode(text, true));
  return prompts;
}

std::vector<GenerationResult> alone(const Model& m, const std::vector<std::vector<int32_t>>& ps,
                                    const GenerationParams& params) {
  ThreadPool pool(2);
  std::vector<GenerationResult> out;
  for (const auto& p : ps) {
    Session s(m, 128, pool);
    Generator g(m, s);
    out.push_back(g.generate(p, params));
  }
  return out;
}

// A model with a scheduler over `slots` sequences of n_ctx positions.
// The model with the CPU backend's interleaved layouts (as a planned session adopts them), whose
// products equal the scalar reference at every batch size; in the file's row layout a batch of
// 4 or more tokens takes AMX tiles where the CPU has them, equal to the single-token SIMD kernels
// only within rounding (matvec.h).
std::unique_ptr<Model> interleaved_model(const std::string& path) {
  auto m = Model::load(path);
  const int n = m->adopt_layouts(
      [](const MatrixView& w, WeightUse use) {
        return CpuBackend::layout_for(w, use, /*repack=*/true);
      },
      /*dense_ffn=*/true);
  EXPECT_GT(n, 0) << path << ": no matrix interleaved";
  return m;
}

struct Scheduled {
  Scheduled(const std::string& path, int slots, SchedulerOptions options = {}, int64_t n_ctx = 128,
            bool interleaved = false)
      : model(interleaved ? interleaved_model(path) : Model::load(path)),
        session(*model, n_ctx, pool, with_slots(slots)),
        sched(*model, session, options) {}
  static SessionOptions with_slots(int slots) {
    SessionOptions so;
    so.n_seq = slots;
    return so;
  }
  std::unique_ptr<Model> model;
  ThreadPool pool{2};
  Session session;
  BatchScheduler sched;
};

// Waits for the job's end; its pieces go to `pieces` when given.
void wait_done(JobHandle& job, std::vector<JobHandle::Piece>* pieces = nullptr) {
  std::vector<JobHandle::Piece> mine;
  while (!job.wait(pieces ? *pieces : mine, std::chrono::milliseconds(100))) {
  }
}

// Submits every prompt at once and waits for all.
std::vector<GenerationResult> batched(BatchScheduler& sched,
                                      const std::vector<std::vector<int32_t>>& ps,
                                      const GenerationParams& params) {
  std::vector<std::shared_ptr<JobHandle>> jobs;
  for (const auto& p : ps) {
    jobs.push_back(sched.submit({p, params, 1}));
    EXPECT_NE(jobs.back(), nullptr);
  }
  std::vector<GenerationResult> out;
  for (auto& j : jobs) {
    std::vector<JobHandle::Piece> pieces;
    std::string streamed;
    wait_done(*j, &pieces);
    for (auto& p : pieces) streamed += p.text;
    EXPECT_EQ(streamed, j->results()[0].text) << "the streamed pieces add up to the text";
    out.push_back(j->results()[0]);
  }
  return out;
}

// Interleaved Q8_0/Q4_0 products are exact integer sums whatever the batch: a sequence's tokens
// are bit for bit what they are alone, so greedy text is equal. F16 (the shipped model) sums in
// tiles whose rounding differs from one row's: the greedy text is equal here too (the argmax
// never sat within rounding of a tie on these prompts).
TEST(BatchScheduler, SequencesInABatchGiveTheTextTheyGiveAlone) {
  for (auto [recipe, name] : {std::pair{QuantRecipe::F16, "f16"},
                              {QuantRecipe::Q8_0, "q8_0"},
                              {QuantRecipe::Q4_0, "q4_0"}}) {
    const std::string path =
        recipe == QuantRecipe::F16 ? shipped_model() : shipped_as(recipe, name);
    const auto m = Model::load(path);
    const auto prompts = test_prompts(*m->tokenizer);
    const auto expected = alone(*m, prompts, greedy(24));
    ThreadPool pool(2);
    SessionOptions so;
    so.n_seq = 4;  // fewer slots than requests: some wait, and join mid-way
    Session session(*m, 128, pool, so);
    SchedulerOptions sched_options;
    sched_options.step_tokens = 8;  // prompts read in several chunks beside decoding
    sched_options.min_prompt_chunk = 3;
    BatchScheduler sched(*m, session, sched_options);
    const auto got = batched(sched, prompts, greedy(24));
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].text, expected[i].text) << name << " prompt " << i;
      EXPECT_EQ(got[i].finish_reason, expected[i].finish_reason) << name << " prompt " << i;
      EXPECT_EQ(got[i].completion_tokens, expected[i].completion_tokens) << name << " " << i;
    }
    const SchedulerMetrics mt = sched.metrics();
    EXPECT_EQ(mt.finished, prompts.size());
    EXPECT_GT(mt.step_tokens, mt.steps) << "steps carried several sequences";
  }
}

TEST(BatchScheduler, SeededSamplingIsReproduciblePerRequestAndChoicesDiffer) {
  Scheduled s(shipped_model(), 3);
  const auto& m = s.model;
  BatchScheduler& sched = s.sched;
  GenerationParams p = greedy(20);
  p.sampling.temperature = 1.0f;
  p.sampling.top_k = 0;
  p.sampling.top_p = 1.0f;
  p.sampling.min_p = 0.0f;
  p.sampling.seed = 7;
  const auto prompt = m->tokenizer->encode("And God said", true);
  // The same request alone, and beside others with n = 3 choices.
  const auto first = batched(sched, {prompt}, p)[0];
  auto noise = test_prompts(*m->tokenizer);
  noise.at(2) = prompt;  // the third of seven
  const auto again = batched(sched, noise, p)[2];
  EXPECT_EQ(first.text, again.text);
  auto job = sched.submit({prompt, p, 3});
  ASSERT_NE(job, nullptr);
  std::vector<JobHandle::Piece> pieces;
  wait_done(*job, &pieces);
  ASSERT_EQ(job->results().size(), 3u);
  EXPECT_EQ(job->results()[0].text, first.text) << "choice 0 samples with the request's seed";
  EXPECT_NE(job->results()[1].text, job->results()[0].text) << "choice 1: seed + 1";
  for (const auto& piece : pieces) EXPECT_TRUE(piece.choice >= 0 && piece.choice < 3);
}

// Choices of one prompt read it once: choice 0 evaluates it, the others copy its KV entries
// and sample their first token from its logits; the text is what each gives reading it alone.
TEST(BatchScheduler, ChoicesReadTheirPromptOnce) {
  Scheduled s(shipped_as(QuantRecipe::Q8_0, "q8_0_choices"), 4);
  const auto& m = s.model;
  BatchScheduler& sched = s.sched;
  GenerationParams p = greedy(12);
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 11;
  const auto prompt = m->tokenizer->encode("The earth was without form, and void", true);
  auto job = sched.submit({prompt, p, 4});
  ASSERT_NE(job, nullptr);
  wait_done(*job);
  EXPECT_EQ(sched.metrics().prompt_tokens, prompt.size());
  // Each choice alone: a fresh session, seed + i.
  for (int i = 0; i < 4; ++i) {
    GenerationParams alone_params = p;
    alone_params.sampling.seed = p.sampling.seed + static_cast<uint64_t>(i);
    EXPECT_EQ(job->results()[static_cast<size_t>(i)].text,
              alone(*m, {prompt}, alone_params)[0].text)
        << "choice " << i;
  }
}

TEST(BatchScheduler, ACancelledRequestFreesItsSlotAndTheQueueLimitRefuses) {
  SchedulerOptions o;
  o.max_queue = 1;
  // A slot long enough that the endless requests below outlast the test's steps even on a
  // loaded machine (4000 tokens take the tiny model about 2 s).
  Scheduled s(shipped_model(), 1, o, 4096);
  const auto& m = s.model;
  BatchScheduler& sched = s.sched;
  const auto prompt = m->tokenizer->encode("In the beginning", true);
  GenerationParams endless = greedy(-1);  // until EOS or a full context
  auto a = sched.submit({prompt, endless, 1});
  ASSERT_NE(a, nullptr);
  // Wait until a holds the slot and generates.
  std::vector<JobHandle::Piece> pieces;
  while (pieces.empty()) a->wait(pieces, std::chrono::milliseconds(100));
  auto b = sched.submit({prompt, greedy(4), 1});  // waits for the slot
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(sched.submit({prompt, greedy(4), 1}), nullptr) << "over max_queue";
  EXPECT_EQ(sched.metrics().rejected, 1u);
  a->cancel();
  wait_done(*a);
  EXPECT_TRUE(a->results()[0].cancelled);
  wait_done(*b);
  EXPECT_FALSE(b->results()[0].cancelled);
  EXPECT_EQ(b->results()[0].completion_tokens, 4);
  // b reused the prefix a left in the slot.
  EXPECT_EQ(b->results()[0].cached_tokens, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(sched.metrics().cancelled, 1u);
  for (const SlotStatus& s : sched.slots()) EXPECT_EQ(s.state, "idle");
  // A cancelled request still waiting for a slot leaves the queue.
  auto c = sched.submit({prompt, endless, 1});
  ASSERT_NE(c, nullptr);
  pieces.clear();
  while (pieces.empty()) c->wait(pieces, std::chrono::milliseconds(100));
  auto d = sched.submit({prompt, greedy(2), 1});
  ASSERT_NE(d, nullptr);
  d->cancel();
  wait_done(*d);
  EXPECT_TRUE(d->results()[0].cancelled);
  EXPECT_EQ(d->results()[0].completion_tokens, 0);
  c->cancel();
  wait_done(*c);
  EXPECT_NE(sched.submit({prompt, greedy(1), 1}), nullptr) << "the queue recovered";
}

TEST(BatchScheduler, BadRequestsAreErrorsAndAFullContextEndsWithLength) {
  Scheduled s(shipped_model(), 2, {}, 16);
  BatchScheduler& sched = s.sched;
  EXPECT_THROW(sched.submit({{}, greedy(1), 1}), Error);
  EXPECT_THROW(sched.submit({std::vector<int32_t>(16, 5), greedy(1), 1}), Error);
  EXPECT_THROW(sched.submit({{1, 999999}, greedy(1), 1}), Error);
  EXPECT_THROW(sched.submit({{1, 2}, greedy(1), 0}), Error);
  // 10 prompt tokens in a 16-position slot: 7 tokens, the last one never evaluated.
  const std::vector<int32_t> prompt(10, 7);
  auto j = sched.submit({prompt, greedy(-1), 2});
  ASSERT_NE(j, nullptr);
  wait_done(*j);
  for (const GenerationResult& r : j->results()) {
    if (r.finish_reason == "stop") continue;  // EOS came first
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.completion_tokens, 16 - 10 + 1);
  }
}

// Issue 52.7: a grammar that fails mid-reply (past its path limit once its first character is
// taken) ends its own request, as the request's fault; the request beside it runs to its end.
// Was: the scheduler's catch ended every busy slot with the other client's message.
TEST(BatchScheduler, AGrammarFailingMidReplyEndsItsRequestAlone) {
  Scheduled s(shipped_model(), 2);
  std::string gbnf = "root ::= \"s\" a0\n";
  for (int i = 0; i < 20; ++i) gbnf += fmt::format("a{} ::= a{} | a{}\n", i, i + 1, i + 1);
  gbnf += "a20 ::= \"x\"\n";
  GenerationParams constrained = greedy(8);
  constrained.grammar = std::make_shared<const Grammar>(Grammar::parse(gbnf));
  const std::vector<int32_t> prompt = s.model->tokenizer->encode("In the beginning", true);
  auto plain = s.sched.submit({prompt, greedy(8), 1});
  auto bad = s.sched.submit({prompt, constrained, 1});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(bad, nullptr);
  wait_done(*bad);
  wait_done(*plain);
  ASSERT_NE(bad->first_failure(), nullptr);
  EXPECT_TRUE(bad->first_failure()->request_fault);
  EXPECT_NE(bad->first_failure()->error.find("more than 4096 paths"), std::string::npos)
      << bad->first_failure()->error;
  EXPECT_EQ(plain->first_failure(), nullptr);
  EXPECT_EQ(plain->results()[0].finish_reason, "length");
  EXPECT_EQ(plain->results()[0].completion_tokens, 8);
}

// An embedding job pools the final hidden states Session::hidden() gives for its tokens alone:
// read in chunks beside generating requests (interleaved Q8_0: bit for bit), and it leaves the
// generating requests' text as it is alone.
TEST(BatchScheduler, EmbeddingJobsPoolWhatTheirTokensGiveAloneBesideGeneration) {
  const std::string path = shipped_as(QuantRecipe::Q8_0, "q8_0_embed");
  const auto m = interleaved_model(path);
  const auto prompts = test_prompts(*m->tokenizer);
  const int64_t d = m->config.n_embd;
  for (Pooling pooling : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    std::vector<std::vector<float>> expected;
    ThreadPool pool(2);
    for (const auto& p : prompts) {
      Session s(*m, 128, pool);
      std::vector<BatchToken> batch;
      for (size_t i = 0; i < p.size(); ++i) batch.push_back({p[i], 0, false, true});
      s.decode(batch);
      ASSERT_EQ(s.hidden().size(), p.size() * static_cast<size_t>(d));
      PooledEmbedding e(d);
      for (size_t i = 0; i < p.size(); ++i)
        if (pooled_token(pooling, static_cast<int64_t>(i), static_cast<int64_t>(p.size())))
          e.add(s.hidden().subspan(i * static_cast<size_t>(d), static_cast<size_t>(d)));
      expected.push_back(e.result());
    }
    const auto texts = alone(*m, {prompts[0], prompts[2]}, greedy(16));
    SchedulerOptions o;
    o.step_tokens = 8;  // prompts in several chunks
    o.min_prompt_chunk = 3;
    Scheduled sc(path, 3, o, 128, /*interleaved=*/true);
    auto gen0 = sc.sched.submit({prompts[0], greedy(16), 1});
    std::vector<std::shared_ptr<JobHandle>> jobs;
    for (const auto& p : prompts) {
      JobRequest r{p, greedy(0), 1};
      r.embed = pooling;
      jobs.push_back(sc.sched.submit(r));
      ASSERT_NE(jobs.back(), nullptr);
    }
    auto gen2 = sc.sched.submit({prompts[2], greedy(16), 1});
    for (size_t i = 0; i < jobs.size(); ++i) {
      wait_done(*jobs[i]);
      EXPECT_EQ(jobs[i]->embedding(), expected[i]) << pooling_name(pooling) << " prompt " << i;
      EXPECT_EQ(jobs[i]->results()[0].completion_tokens, 0);
    }
    wait_done(*gen0);
    wait_done(*gen2);
    EXPECT_EQ(gen0->results()[0].text, texts[0].text);
    EXPECT_EQ(gen2->results()[0].text, texts[1].text);
    JobRequest two{prompts[0], greedy(0), 2};
    two.embed = pooling;
    EXPECT_THROW(sc.sched.submit(two), Error) << "an embedding has one choice";
  }
}

// The gauges a gateway balances on: requests in slots (a job with n choices counts once) and the
// KV positions busy slots hold; an idle slot's cached prefix is reusable, not counted as used.
TEST(BatchScheduler, RunningRequestsAndKvUseWhileAJobRuns) {
  Scheduled sc(shipped_model(), 3, {}, 2048);
  const auto prompt = test_prompts(*sc.model->tokenizer)[0];
  auto job = sc.sched.submit({prompt, greedy(-1), 2});  // long: until the context is full
  ASSERT_NE(job, nullptr);
  SchedulerMetrics seen;
  for (int i = 0; i < 5000; ++i) {
    seen = sc.sched.metrics();
    if (seen.running_requests == 1 &&
        seen.kv_positions_used > 2 * static_cast<int64_t>(prompt.size()))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(seen.running_requests, 1) << "two choices, one request";
  EXPECT_GT(seen.kv_positions_used, 2 * static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(seen.kv_positions, 3 * 2048);
  job->cancel();
  wait_done(*job);
  const SchedulerMetrics after = sc.sched.metrics();
  EXPECT_EQ(after.running_requests, 0);
  EXPECT_EQ(after.kv_positions_used, 0);
}

TEST(Pooling, NamesTokensAndUnitLength) {
  EXPECT_EQ(parse_pooling("mean"), Pooling::Mean);
  EXPECT_EQ(parse_pooling("cls"), Pooling::Cls);
  EXPECT_EQ(parse_pooling("last"), Pooling::Last);
  EXPECT_THROW(parse_pooling("rank"), Error);
  EXPECT_TRUE(pooled_token(Pooling::Mean, 3, 5));
  EXPECT_TRUE(pooled_token(Pooling::Cls, 0, 5));
  EXPECT_FALSE(pooled_token(Pooling::Cls, 1, 5));
  EXPECT_TRUE(pooled_token(Pooling::Last, 4, 5));
  EXPECT_FALSE(pooled_token(Pooling::Last, 3, 5));
  PooledEmbedding e(2);
  e.add(std::vector<float>{3, 0});
  e.add(std::vector<float>{0, 4});  // mean (1.5, 2): length 2.5
  EXPECT_EQ(e.added(), 2);
  const auto v = e.result();
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  EXPECT_THROW(e.add(std::vector<float>{1, 2, 3}), Error);
  PooledEmbedding zero(2);
  zero.add(std::vector<float>{0, 0});
  EXPECT_EQ(zero.result(), (std::vector<float>{0, 0})) << "all zeros stay zeros, not NaN";
}

}  // namespace
}  // namespace strata
