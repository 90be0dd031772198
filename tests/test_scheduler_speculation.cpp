// Speculative decoding inside continuous batching (generation/batch_scheduler.h): how much a slot
// may draft, and slots drafting by prompt lookup or with a draft model (the shipped model's
// Q4_0 copy, its slots drafted in one batch) give the text, finish reasons and token counts of
// the same requests without drafts, greedy and sampled, up to a full context.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "generation/batch_scheduler.h"
#include "offline/quantize.h"
#include "test_helpers.h"

namespace strata {
namespace {

TEST(DraftRoom, TheRequestsLimitTheTokensLeftAndAFreePosition) {
  SpeculationParams server;
  server.draft_max = 16;
  EXPECT_EQ(draft_room(server, -1, 10, 128, -1), 16);
  EXPECT_EQ(draft_room(server, 4, 10, 128, -1), 4);    // the request's own
  EXPECT_EQ(draft_room(server, 0, 10, 128, -1), 0);    // a request that drafts nothing
  EXPECT_EQ(draft_room(server, -1, 120, 128, -1), 6);  // 120 + pending + 6 leaves one free
  EXPECT_EQ(draft_room(server, -1, 126, 128, -1), 0);
  EXPECT_EQ(draft_room(server, -1, 10, 128, 3), 2);  // three tokens left: two drafted, one drawn
  EXPECT_EQ(draft_room(server, -1, 10, 128, 1), 0);
}

// The shipped model in one type throughout, with the CPU's interleaved layouts: Q8_0 products
// are exact integer sums whatever the batch, so a draft's rows give one token's logits bit for bit.
std::unique_ptr<Model> shipped_in(QuantRecipe recipe, const std::string& name, bool interleave) {
  const std::string path = strata::testing::temp_file("speculation_" + name + ".gguf");
  QuantizeOptions o;
  o.input = strata::testing::source_file("models/strata-tiny.gguf");
  o.output = path;
  o.recipe = recipe;
  o.pure = true;
  quantize_model(o);
  auto m = Model::load(path);
  std::remove(path.c_str());
  if (interleave)
    m->adopt_layouts([](const MatrixView& w,
                        WeightUse use) { return CpuBackend::layout_for(w, use, /*repack=*/true); },
                     /*dense_ffn=*/true);
  return m;
}

struct Served {
  std::vector<GenerationResult> results;
  SchedulerMetrics metrics;
};

Served serve_all(const Model& m, Drafter* drafter, const std::vector<JobRequest>& jobs) {
  ThreadPool pool(2);
  SessionOptions so;
  so.n_seq = 3;  // fewer slots than requests: some wait and join mid-way
  Session session(m, 96, pool, so);
  SchedulerOptions options;
  options.drafter = drafter;
  options.speculation.draft_max = 5;
  options.step_tokens = 16;
  BatchScheduler sched(m, session, options);
  std::vector<std::shared_ptr<JobHandle>> handles;
  for (const JobRequest& j : jobs) handles.push_back(sched.submit(j));
  Served out;
  for (auto& h : handles) {
    std::vector<JobHandle::Piece> pieces;
    while (!h->wait(pieces, std::chrono::milliseconds(100))) {
    }
    out.results.push_back(h->results()[0]);
  }
  out.metrics = sched.metrics();
  return out;
}

std::vector<JobRequest> speculation_jobs(const Tokenizer& tok) {
  const std::string phrase = "And God said, Let there be light: and there was light. ";
  std::vector<JobRequest> jobs;
  int i = 0;
  for (const std::string& text :
       {phrase + phrase + "And God", std::string("In the beginning"), phrase + "And the evening",
        std::string("Let there be"), phrase + phrase + phrase + "And"}) {
    JobRequest j;
    j.prompt = tok.encode(text, true);
    j.params.max_tokens = i == 4 ? -1 : 24;  // the last runs to the end of its context
    j.params.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    j.params.sampling.seed = 5 + static_cast<uint64_t>(i);
    if (i == 3) j.params.draft_max = 0;  // a request that asks for no drafts
    jobs.push_back(std::move(j));
    ++i;
  }
  return jobs;
}

TEST(SchedulerSpeculation, SlotsGiveTheTextTheyGiveWithoutDrafts) {
  const auto target = shipped_in(QuantRecipe::Q8_0, "q8_0", true);
  const auto draft = shipped_in(QuantRecipe::Q4_0, "q4_0", false);
  const auto jobs = speculation_jobs(*target->tokenizer);
  const Served plain = serve_all(*target, nullptr, jobs);
  EXPECT_EQ(plain.metrics.draft_tokens, 0u);
  ThreadPool pool(2);
  SessionOptions three;
  three.n_seq = 3;
  Session draft_session(*draft, 96, pool, three);
  ModelDrafter model_drafter(draft_session, target->tokenizer->n_vocab(), 0.3f);
  LookupDrafter lookup(2, 4);
  for (Drafter* drafter : std::initializer_list<Drafter*>{&lookup, &model_drafter}) {
    const Served spec = serve_all(*target, drafter, jobs);
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const GenerationResult& a = plain.results[i];
      const GenerationResult& b = spec.results[i];
      EXPECT_EQ(b.error, "") << drafter->kind() << " request " << i;
      EXPECT_EQ(b.text, a.text) << drafter->kind() << " request " << i;
      EXPECT_EQ(b.finish_reason, a.finish_reason) << drafter->kind() << " request " << i;
      EXPECT_EQ(b.completion_tokens, a.completion_tokens) << drafter->kind() << " request " << i;
      EXPECT_LE(b.draft_accepted, b.draft_tokens);
      drafted += b.draft_tokens;
      accepted += b.draft_accepted;
    }
    EXPECT_EQ(plain.results[4].finish_reason, "length");
    EXPECT_EQ(spec.results[3].draft_tokens, 0) << "speculative.n_max 0 drafted";
    EXPECT_GT(spec.metrics.draft_tokens, 0u) << drafter->kind();
    EXPECT_GT(spec.metrics.draft_accepted, 0u) << drafter->kind();
    EXPECT_EQ(static_cast<int64_t>(spec.metrics.draft_tokens), drafted) << drafter->kind();
    EXPECT_EQ(static_cast<int64_t>(spec.metrics.draft_accepted), accepted) << drafter->kind();
    EXPECT_EQ(spec.metrics.generated_tokens, plain.metrics.generated_tokens) << drafter->kind();
    // Kept drafts are tokens without a pass of their own: fewer steps carried the decoding.
    EXPECT_LT(spec.metrics.steps, plain.metrics.steps) << drafter->kind();
  }
}

}  // namespace
}  // namespace strata
