#include "generation/batch_scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"
#include "generation/completion_text.h"
#include "generation/grammar_constraint.h"
#include "generation/sampler.h"

namespace strata {

SlotChoice pick_slot(std::span<const std::vector<int32_t>> cached, const std::vector<bool>& free,
                     std::span<const int32_t> prompt) {
  SlotChoice best;
  size_t best_cached = 0;
  const size_t limit = prompt.empty() ? 0 : prompt.size() - 1;
  for (size_t i = 0; i < cached.size() && i < free.size(); ++i) {
    if (!free[i]) continue;
    const std::vector<int32_t>& c = cached[i];
    int64_t shared = 0;
    while (static_cast<size_t>(shared) < std::min(limit, c.size()) &&
           c[static_cast<size_t>(shared)] == prompt[static_cast<size_t>(shared)])
      ++shared;
    const bool better =
        best.slot < 0 || shared > best.keep || (shared == best.keep && c.size() < best_cached);
    if (better) {
      best = {static_cast<int>(i), shared};
      best_cached = c.size();
    }
  }
  return best;
}

std::vector<int64_t> prompt_chunks(int64_t decoding, std::span<const int64_t> remaining,
                                   int64_t step_tokens, int64_t min_chunk) {
  int64_t budget = std::max(step_tokens - decoding, std::min(min_chunk, step_tokens));
  std::vector<int64_t> chunks;
  for (int64_t r : remaining) {
    const int64_t take = std::clamp<int64_t>(r, 0, budget);
    chunks.push_back(take);
    budget -= take;
  }
  return chunks;
}

int draft_room(const SpeculationParams& server, int request_max, int64_t n_past, int64_t n_ctx,
               int64_t tokens_left) {
  int64_t room = request_max >= 0 ? request_max : server.draft_max;
  room = std::min(room, n_ctx - n_past - 2);
  if (tokens_left >= 0) room = std::min(room, tokens_left - 1);
  return static_cast<int>(std::max<int64_t>(room, 0));
}

bool JobHandle::wait(std::vector<Piece>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_);
  const auto ready = [&] { return !pieces_.empty() || done_ == static_cast<int>(results_.size()); };
  cv_.wait_for(lock, timeout, ready);
  for (Piece& p : pieces_) out.push_back(std::move(p));
  pieces_.clear();
  return done_ == static_cast<int>(results_.size());
}

struct BatchScheduler::Job {
  JobRequest request;
  std::shared_ptr<JobHandle> handle;
  int placed = 0;  // choices given a slot
  Timer since_submit;
  // Choice 0 while it reads the prompt, and the choices placed with it: they wait, and take
  // a copy of its KV entries and its first logits, so the prompt is evaluated once.
  Sequence* leader = nullptr;
  std::vector<Sequence*> followers;
};

// One choice of a job in a slot.
struct BatchScheduler::Sequence {
  Sequence(std::shared_ptr<Job> j, int c, int s, const Tokenizer& tok)
      : job(std::move(j)),
        choice(c),
        slot(s),
        sampler(sampling_for(job->request.params.sampling, c)),
        text(tok, job->request.params.stop),
        history(job->request.prompt) {
    if (job->request.params.grammar)
      constraint = std::make_unique<GrammarConstraint>(job->request.params.grammar, tok);
  }
  Sequence(std::shared_ptr<Job> j, int s, int64_t n_embd, const Tokenizer& tok)
      : Sequence(std::move(j), 0, s, tok) {
    pooled = std::make_unique<PooledEmbedding>(n_embd);
  }
  static SamplerParams sampling_for(SamplerParams p, int choice) {
    p.seed += static_cast<uint64_t>(choice);
    return p;
  }
  const std::vector<int32_t>& prompt() const { return job->request.prompt; }
  bool reading_prompt() const { return fed < static_cast<int64_t>(prompt().size()); }
  bool in_batch() const { return !follows; }

  std::shared_ptr<Job> job;
  int choice, slot;
  Sampler sampler;
  std::unique_ptr<GrammarConstraint> constraint;  // the request's grammar, if any
  std::unique_ptr<PooledEmbedding> pooled;        // an embedding job's
  CompletionText text;
  std::vector<int32_t> history;  // prompt and generated tokens (the repetition penalty's)
  // Logprobs of generated tokens whose text is not delivered yet (held back: a partial
  // character, or what may begin a stop string).
  std::vector<TokenLogprob> pending;
  int64_t fed = 0;               // tokens of the prompt in the slot's cache
  bool follows = false;          // waits for the leader's copy of the prompt (Job::leader)
  int32_t next = -1;             // a sampled token to evaluate next (generating)
  GenerationResult result;
  Timer started;  // admitted to the slot
  bool first_logits = false;
  DraftBackoff backoff;  // speculative decoding: steps to skip drafting after failed drafts
};

BatchScheduler::BatchScheduler(const Model& model, Session& session, SchedulerOptions options)
    : model_(model), session_(session), options_(options) {
  if (!model.tokenizer) fail("text generation needs a model with a tokenizer");
  if (options_.max_queue < 0) fail("the queue limit must not be negative");
  if (options_.step_tokens < 1) fail("a step takes at least one token");
  slots_.resize(static_cast<size_t>(session.n_seq()));
  cached_.resize(slots_.size());
  for (int i = 0; i < session.n_seq(); ++i) session.truncate(i, 0);
  metrics_.slots = session.n_seq();
  thread_ = std::thread([this] { run(); });
}

BatchScheduler::~BatchScheduler() {
  stop();
}

void BatchScheduler::stop() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<JobHandle> BatchScheduler::submit(JobRequest request) {
  check_prompt(request.prompt, model_.config.n_vocab, session_.n_ctx());
  if (request.n < 1) fail("a request asks for at least one choice, not {}", request.n);
  if (request.embed && request.n != 1) fail("an embedding job has one choice, not {}", request.n);
  auto job = std::make_shared<Job>();
  job->handle = std::make_shared<JobHandle>();
  job->handle->results_.resize(static_cast<size_t>(request.n));
  job->request = std::move(request);
  {
    std::lock_guard lock(m_);
    if (stop_ || static_cast<int>(waiting_.size()) >= options_.max_queue) {
      ++metrics_.rejected;
      return nullptr;
    }
    job->handle->id_ = next_id_++;
    ++metrics_.requests;
    waiting_.push_back(job);
    metrics_.queue_depth = static_cast<int>(waiting_.size());
  }
  cv_.notify_all();
  return job->handle;
}

SchedulerMetrics BatchScheduler::metrics() const {
  std::lock_guard lock(m_);
  SchedulerMetrics m = metrics_;
  std::vector<uint64_t> jobs;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (const Sequence* s = slots_[i].get()) {
      jobs.push_back(s->job->handle->id());
      m.kv_positions_used += static_cast<int64_t>(cached_[i].size());
    }
  std::sort(jobs.begin(), jobs.end());
  m.running_requests = static_cast<int>(std::unique(jobs.begin(), jobs.end()) - jobs.begin());
  m.kv_positions = static_cast<int64_t>(slots_.size()) * session_.n_ctx();
  return m;
}

std::vector<SlotStatus> BatchScheduler::slots() const {
  std::lock_guard lock(m_);
  std::vector<SlotStatus> out;
  for (size_t i = 0; i < slots_.size(); ++i) {
    SlotStatus s;
    s.id = static_cast<int>(i);
    s.n_past = static_cast<int64_t>(cached_[i].size());
    if (const Sequence* q = slots_[i].get()) {
      s.state = q->reading_prompt() ? "prompt" : "generating";
      s.job = q->job->handle->id();
      s.prompt_tokens = static_cast<int64_t>(q->prompt().size());
      s.generated = q->result.completion_tokens;
    } else {
      s.state = "idle";
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The job's choices not given a slot end with `error` (those in slots end through finish()).
void BatchScheduler::fail_unplaced(Job& job, const std::string& error) {
  JobHandle& h = *job.handle;
  {
    std::lock_guard hl(h.m_);
    for (int c = job.placed; c < job.request.n; ++c) {
      GenerationResult& r = h.results_[static_cast<size_t>(c)];
      r.error = error;
      r.request_fault = true;
      r.finish_reason = "error";
      ++h.done_;
    }
  }
  h.cv_.notify_all();
}

// The job's choices not given a slot end as cancelled (those in slots end through finish()).
void BatchScheduler::cancel_unplaced(Job& job) {
  JobHandle& h = *job.handle;
  {
    std::lock_guard hl(h.m_);
    for (int c = job.placed; c < job.request.n; ++c) {
      h.results_[static_cast<size_t>(c)].cancelled = true;
      ++h.done_;
    }
  }
  h.cv_.notify_all();
}

int BatchScheduler::busy_slots() const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s != nullptr; }));
}

bool BatchScheduler::has_work() const {
  const int busy = busy_slots();
  return stop_ || busy > 0 || (!waiting_.empty() && busy < static_cast<int>(slots_.size()));
}

void BatchScheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(m_);
      // Wake at least every 50 ms to notice cancelled jobs waiting for a slot.
      cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return has_work(); });
      if (stop_) break;
      drop_cancelled();
      admit();
    }
    try {
      step();
    } catch (const std::exception& e) {
      // Nothing the requests did (they were checked at submit): end them with the reason.
      std::lock_guard lock(m_);
      for (auto& s : slots_)
        if (s) {
          s->result.error = e.what();
          finish(*s, "error");
        }
      for (size_t i = 0; i < slots_.size(); ++i) {
        session_.truncate(static_cast<int>(i), 0);
        cached_[i].clear();
      }
    }
  }
  // Stopping: every job still here ends as cancelled.
  std::lock_guard lock(m_);
  for (auto& s : slots_)
    if (s) {
      s->result.cancelled = true;
      finish(*s, "stop");
    }
  for (auto& job : waiting_) cancel_unplaced(*job);
  waiting_.clear();
}

void BatchScheduler::drop_cancelled() {
  for (auto& s : slots_)
    if (s && s->job->handle->cancelled()) {
      s->result.cancelled = true;
      ++metrics_.cancelled;
      finish(*s, "stop");
    }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Job& job = **it;
    if (!job.handle->cancelled() || job.placed > 0) {
      ++it;
      continue;
    }
    ++metrics_.cancelled;
    cancel_unplaced(job);
    it = waiting_.erase(it);
  }
  metrics_.queue_depth = static_cast<int>(waiting_.size());
}

void BatchScheduler::admit() {
  while (!waiting_.empty()) {
    std::vector<bool> free_slots(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) free_slots[i] = !slots_[i];
    const std::shared_ptr<Job> job = waiting_.front();
    // A cancelled job whose other choices run places no more.
    if (job->handle->cancelled()) {
      cancel_unplaced(*job);
      waiting_.pop_front();
      continue;
    }
    // Pooling over every token (or the first) reuses no prefix: the slot that loses least.
    const bool reuse = !job->request.embed || *job->request.embed == Pooling::Last;
    const SlotChoice choice = pick_slot(
        cached_, free_slots, reuse ? std::span<const int32_t>(job->request.prompt) : std::span<const int32_t>());
    if (choice.slot < 0) break;
    const auto slot = static_cast<size_t>(choice.slot);
    session_.truncate(choice.slot, choice.keep);
    cached_[slot].resize(static_cast<size_t>(choice.keep));
    std::unique_ptr<Sequence> seq;
    try {  // a grammar's start state was checked when it compiled; a failure still ends this job alone
      seq = job->request.embed
                ? std::make_unique<Sequence>(job, choice.slot, model_.config.n_embd, *model_.tokenizer)
                : std::make_unique<Sequence>(job, job->placed, choice.slot, *model_.tokenizer);
    } catch (const std::exception& e) {
      fail_unplaced(*job, e.what());
      waiting_.pop_front();
      continue;
    }
    seq->fed = choice.keep;
    seq->result.prompt_tokens = static_cast<int64_t>(job->request.prompt.size());
    seq->result.cached_tokens = choice.keep;
    seq->result.queued_s = job->since_submit.seconds();
    if (seq->choice == 0 && seq->reading_prompt()) {
      job->leader = seq.get();
    } else if (job->leader != nullptr) {
      seq->follows = true;
      job->followers.push_back(seq.get());
    }
    slots_[slot] = std::move(seq);
    if (++job->placed == job->request.n) waiting_.pop_front();
  }
  metrics_.queue_depth = static_cast<int>(waiting_.size());
  metrics_.slots_busy = busy_slots();
}

std::vector<std::vector<int32_t>> BatchScheduler::draft_for(
    std::span<Sequence* const> generating) {
  std::vector<std::vector<int32_t>> drafts(generating.size());
  if (options_.drafter == nullptr) return drafts;
  std::vector<DraftRequest> requests;
  for (size_t i = 0; i < generating.size(); ++i) {
    const Sequence& s = *generating[i];
    const GenerationParams& p = s.job->request.params;
    const int64_t left = p.max_tokens < 0 ? -1 : p.max_tokens - s.result.completion_tokens;
    const int room = draft_room(options_.speculation, p.draft_max, session_.n_past(s.slot),
                                session_.n_ctx(), left);
    if (room > 0 && draft_now(generating[i]->backoff))
      requests.push_back({s.slot, s.history, room, &drafts[i], p.draft_p_min});
  }
  if (!requests.empty()) options_.drafter->draft(requests);
  for (size_t i = 0; i < generating.size(); ++i) {
    const int min = generating[i]->job->request.params.draft_min;
    if (static_cast<int>(drafts[i].size()) < (min >= 0 ? min : options_.speculation.draft_min))
      drafts[i].clear();
  }
  return drafts;
}

void BatchScheduler::step() {
  // Generating sequences first (their pending token and its draft), then prompt chunks in
  // arrival order.
  std::vector<BatchToken> batch;
  std::vector<Sequence*> generating;
  std::vector<Sequence*> rows;         // the prompt sequence of each logits row after theirs
  std::vector<Sequence*> hidden_rows;  // the embedding sequence of each hidden-state row
  std::vector<Sequence*> reading;
  std::vector<int64_t> remaining;
  for (auto& s : slots_) {
    if (!s || !s->in_batch()) continue;
    (s->reading_prompt() ? reading : generating).push_back(s.get());
  }
  const std::vector<std::vector<int32_t>> drafts = draft_for(generating);
  std::vector<int64_t> n_past(generating.size());
  for (size_t i = 0; i < generating.size(); ++i) {
    const Sequence& s = *generating[i];
    n_past[i] = session_.n_past(s.slot);
    batch.push_back({s.next, s.slot, true});
    for (const int32_t d : drafts[i]) batch.push_back({d, s.slot, true});
  }
  // Arrival order: by request, then choice.
  std::sort(reading.begin(), reading.end(), [](const Sequence* a, const Sequence* b) {
    const uint64_t ia = a->job->handle->id(), ib = b->job->handle->id();
    return ia != ib ? ia < ib : a->choice < b->choice;
  });
  for (const Sequence* s : reading)
    remaining.push_back(static_cast<int64_t>(s->prompt().size()) - s->fed);
  const int64_t decoding = static_cast<int64_t>(batch.size());
  const std::vector<int64_t> chunks =
      prompt_chunks(decoding, remaining, options_.step_tokens, options_.min_prompt_chunk);
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < reading.size(); ++i) {
    Sequence& s = *reading[i];
    const auto size = static_cast<int64_t>(s.prompt().size());
    for (int64_t k = 0; k < chunks[i]; ++k) {
      const int32_t token = s.prompt()[static_cast<size_t>(s.fed + k)];
      if (s.pooled) {
        const bool pooled = pooled_token(*s.job->request.embed, s.fed + k, size);
        batch.push_back({token, s.slot, false, pooled});
        if (pooled) hidden_rows.push_back(&s);
        continue;
      }
      const bool last = s.fed + k + 1 == size;
      batch.push_back({token, s.slot, last});
      if (last) rows.push_back(&s);
    }
    prompt_tokens += chunks[i];
  }
  if (batch.empty()) return;
  Timer timer;
  const std::span<const float> logits = session_.decode(batch);
  const double seconds = timer.seconds();
  const auto v = static_cast<size_t>(model_.config.n_vocab);
  // What slots() reads changes under m_ only (this thread alone writes it).
  std::lock_guard lock(m_);
  // The cache now holds what was fed.
  for (const BatchToken& t : batch) cached_[static_cast<size_t>(t.seq)].push_back(t.token);
  for (size_t i = 0; i < reading.size(); ++i) reading[i]->fed += chunks[i];
  ++metrics_.steps;
  metrics_.step_tokens += batch.size();
  metrics_.prompt_tokens += static_cast<uint64_t>(prompt_tokens);
  const double share = seconds / static_cast<double>(batch.size());
  metrics_.prompt_s += share * static_cast<double>(prompt_tokens);
  metrics_.decode_s += share * static_cast<double>(decoding);
  const auto d = static_cast<size_t>(model_.config.n_embd);
  for (size_t r = 0; r < hidden_rows.size(); ++r)
    hidden_rows[r]->pooled->add(session_.hidden().subspan(r * d, d));
  for (Sequence* s : reading)
    if (s->pooled && !s->reading_prompt()) finish_embedding(*s);
  size_t row = 0;
  for (size_t i = 0; i < generating.size(); ++i) {
    const size_t n = 1 + drafts[i].size();
    metrics_.generated_tokens += static_cast<uint64_t>(
        on_draft_rows(*generating[i], drafts[i], logits.subspan(row * v, n * v), n_past[i]));
    row += n;
  }
  for (Sequence* s : rows) on_logits(*s, logits.subspan(row++ * v, v));
  metrics_.slots_busy = busy_slots();
}

int64_t BatchScheduler::on_draft_rows(Sequence& s, std::span<const int32_t> draft,
                                      std::span<const float> rows, int64_t n_past_before) {
  const int slot = s.slot;
  const Sequence* const self = &s;
  const size_t v = rows.size() / (draft.size() + 1);
  if (!draft.empty()) {
    ++metrics_.draft_steps;
    metrics_.draft_tokens += draft.size();
    s.result.draft_tokens += static_cast<int64_t>(draft.size());
  }
  size_t kept = 0;
  int64_t drawn = 0;
  for (size_t i = 0; i <= draft.size(); ++i) {
    const int32_t expected = i < draft.size() ? draft[i] : -1;
    const int32_t t = on_logits(s, rows.subspan(i * v, v), expected);
    ++drawn;
    if (t < 0 || t != expected) break;
    ++kept;
    if (slots_[static_cast<size_t>(slot)].get() != self) break;  // it finished on a kept token
  }
  metrics_.draft_accepted += kept;
  // The pending token and the kept draft stay in a slot that goes on (a finished one keeps its
  // cache whole: every entry is its token's after the ones before it, for the next prompt).
  if (slots_[static_cast<size_t>(slot)].get() == self) {
    if (!draft.empty()) s.backoff = next_backoff(s.backoff, kept);
    session_.truncate(slot, n_past_before + 1 + static_cast<int64_t>(kept));
    cached_[static_cast<size_t>(slot)].resize(static_cast<size_t>(n_past_before + 1) + kept);
  }
  return drawn;
}

int32_t BatchScheduler::on_logits(Sequence& s, std::span<const float> logits, int32_t drafted) {
  // What fails here is this sequence's alone (its grammar past its limits, above all): it ends
  // with the reason, and every other slot goes on.
  const auto slot = static_cast<size_t>(s.slot);
  Sequence* const self = &s;
  try {
    return sample_next(s, logits, drafted);
  } catch (const std::exception& e) {
    if (slots_[slot].get() != self) return -1;  // it had finished already
    self->result.error = e.what();
    self->result.request_fault = dynamic_cast<const GrammarLimit*>(&e) != nullptr;
    finish(*self, "error");
    return -1;
  }
}

int32_t BatchScheduler::sample_next(Sequence& s, std::span<const float> logits, int32_t drafted) {
  if (!s.first_logits) {
    s.first_logits = true;
    s.result.prompt_s = s.started.seconds();
    s.started.reset();
  }
  if (s.job->leader == &s) release_followers(s, logits);
  const GenerationParams& p = s.job->request.params;
  const Tokenizer& tok = *model_.tokenizer;
  // A limit of 0 tokens: the prompt was evaluated (its KV entries kept for the next request),
  // and nothing is sampled.
  if (p.max_tokens == 0) return finish(s, "length"), -1;
  const int32_t next = s.sampler.sample(logits, s.history, s.constraint.get());
  if (next >= 0 && next == drafted) ++s.result.draft_accepted;
  // < 0: the grammar allows nothing.
  if (next < 0 || next == tok.eos()) return finish(s, "stop"), next;
  if (p.logprobs >= 0) s.pending.push_back(token_logprob(logits, next, p.logprobs));
  s.history.push_back(next);
  ++s.result.completion_tokens;
  const bool stopped = s.text.add(next);
  deliver(s, s.text.take());
  if (stopped || (s.constraint && s.constraint->finished())) return finish(s, "stop"), next;
  if (p.max_tokens >= 0 && s.result.completion_tokens >= p.max_tokens)
    return finish(s, "length"), next;
  if (session_.n_past(s.slot) >= session_.n_ctx()) return finish(s, "length"), next;
  s.next = next;
  return next;
}

void BatchScheduler::finish_embedding(Sequence& s) {
  s.result.prompt_s = s.started.seconds();
  JobHandle& h = *s.job->handle;
  {
    std::lock_guard hl(h.m_);
    h.embedding_ = s.pooled->result();
  }
  finish(s, "stop");
}

void BatchScheduler::release_followers(Sequence& leader, std::span<const float> logits) {
  Job& job = *leader.job;
  job.leader = nullptr;
  const auto n = static_cast<int64_t>(leader.prompt().size());
  std::vector<Sequence*> followers;
  followers.swap(job.followers);
  for (Sequence* f : followers) {
    session_.copy_sequence(leader.slot, f->slot, n);
    cached_[static_cast<size_t>(f->slot)] = leader.prompt();
    f->fed = n;
    f->follows = false;
    on_logits(*f, logits);  // its first token from the same logits, with its own sampler
  }
}

void BatchScheduler::deliver(Sequence& s, std::string_view text) {
  if (text.empty()) return;
  // The text completes the pending tokens: their logprobs go with it (and to the result).
  std::vector<TokenLogprob> logprobs;
  logprobs.swap(s.pending);
  s.result.logprobs.insert(s.result.logprobs.end(), logprobs.begin(), logprobs.end());
  JobHandle& h = *s.job->handle;
  {
    std::lock_guard hl(h.m_);
    h.pieces_.push_back({s.choice, std::string(text), std::move(logprobs)});
  }
  h.cv_.notify_all();
}

void BatchScheduler::finish(Sequence& s, const char* reason) {
  // With m_ held. The slot keeps its cached tokens for the next request's prefix.
  s.result.finish_reason = reason;
  if (s.first_logits) s.result.decode_s = s.started.seconds();
  if (!s.result.cancelled) {
    s.text.finish();  // a dangling partial character is dropped
    deliver(s, s.text.take());
  }
  s.result.text = s.text.text();
  s.result.stopping_word = s.text.stopping_word();
  Job& job = *s.job;
  if (job.leader == &s) job.leader = nullptr;
  std::erase(job.followers, &s);
  JobHandle& h = *s.job->handle;
  {
    std::lock_guard hl(h.m_);
    h.results_[static_cast<size_t>(s.choice)] = std::move(s.result);
    ++h.done_;
  }
  h.cv_.notify_all();
  ++metrics_.finished;
  slots_[static_cast<size_t>(s.slot)].reset();  // s is gone from here on
}

}  // namespace strata
