// Continuous batching (Orca's iteration-level scheduling, llama-server's slots): many requests
// generate at once on one session's sequence slots (SessionOptions::n_seq). One thread runs
// steps; a step is one Session::decode of every generating sequence's next token plus chunks of
// the prompts being read, so each weight row is read once per step for all of them. Requests
// join between steps (to the free slot whose cached tokens share the longest prefix with their
// prompt) and leave when done or cancelled, freeing their slot at once. A long prompt is read
// in chunks so the others keep decoding. Sparse modes need nothing more: the FFN of a batch
// computes the union of its tokens' neurons and each token uses only its own.
//
// The decisions (which slot, how many prompt tokens a step takes) are pure functions below;
// the scheduler is the mechanism around them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "generation/generator.h"
#include "generation/pooling.h"
#include "generation/speculative.h"
#include "runtime/session.h"

namespace strata {

// --- policy ---

struct SlotChoice {
  int slot = -1;     // -1: no free slot
  int64_t keep = 0;  // cached prompt tokens reused (at most prompt.size() - 1: the last one is
                     // evaluated again for its logits)
};
// The free slot whose cached tokens share the longest prefix with the prompt; ties go to the
// slot with the fewest cached tokens (the least lost), then the lowest id.
SlotChoice pick_slot(std::span<const std::vector<int32_t>> cached, const std::vector<bool>& free,
                     std::span<const int32_t> prompt);

// Prompt tokens each prompt-reading sequence (in arrival order, `remaining` tokens each) gets in
// a step that already carries `decoding` generating tokens: the step is filled to step_tokens,
// first come first served, and prompts get at least min_chunk tokens even when decoding fills
// the step (so a prompt always advances).
std::vector<int64_t> prompt_chunks(int64_t decoding, std::span<const int64_t> remaining,
                                   int64_t step_tokens, int64_t min_chunk);

// --- mechanism ---

struct SchedulerOptions {
  int max_queue = 256;                       // requests waiting for a slot; more are refused
  int64_t step_tokens = Session::kMaxBatch;  // tokens per step (one pass over the weights)
  int64_t min_prompt_chunk = 16;
  // Speculative decoding (null: off): each generating slot's pending token goes into the step
  // with its draft, and the draws keep the draft while it agrees (generation/speculative.h).
  Drafter* drafter = nullptr;  // outlives the scheduler; drafts for the session's slots
  SpeculationParams speculation;
};

// How many tokens a generating slot may draft: the request's limit (or the server's), no more
// than its remaining tokens allow (one is drawn after the draft) nor than leave a position free in
// its context (so a step never fills it with tokens the draws may drop). 0: none.
int draft_room(const SpeculationParams& server, int request_max, int64_t n_past, int64_t n_ctx,
               int64_t tokens_left);

struct JobRequest {
  std::vector<int32_t> prompt;
  GenerationParams params;
  int n = 1;  // choices (OpenAI's n); choice i samples with seed + i
  // An embedding: the prompt is read (beside other requests' tokens, as a prompt is), its final
  // hidden states pooled (generation/pooling.h) into JobHandle::embedding(); nothing is generated,
  // n is 1. Mean and cls pooling need every token's state, so such a job reuses no cached prefix.
  std::optional<Pooling> embed = std::nullopt;
};

// A submitted request as its HTTP thread sees it.
class JobHandle {
 public:
  struct Piece {
    int choice;
    std::string text;
    std::vector<TokenLogprob> logprobs;  // the tokens whose text ends in this piece (if asked)
  };
  // Waits at most `timeout` for text or the end; moves new pieces (in order per choice) to
  // `out`. True once every choice is done (results() is then complete).
  bool wait(std::vector<Piece>& out, std::chrono::milliseconds timeout);
  // The client went away: the job's sequences stop at the next step and free their slots.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  const std::vector<GenerationResult>& results() const { return results_; }
  // The first choice that failed, once done (null: none did).
  const GenerationResult* first_failure() const {
    for (const GenerationResult& r : results_)
      if (!r.error.empty()) return &r;
    return nullptr;
  }
  // An embedding job's vector, once done (empty if it was cancelled or failed).
  const std::vector<float>& embedding() const { return embedding_; }
  uint64_t id() const { return id_; }

 private:
  friend class BatchScheduler;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Piece> pieces_;
  std::vector<GenerationResult> results_;
  std::vector<float> embedding_;
  int done_ = 0;
  std::atomic<bool> cancelled_{false};
  uint64_t id_ = 0;
};

struct SlotStatus {
  int id = 0;
  std::string state;  // "idle", "prompt", "generating"
  uint64_t job = 0;   // the request's id (0: idle)
  int64_t n_past = 0, prompt_tokens = 0, generated = 0;
};

struct SchedulerMetrics {
  uint64_t requests = 0, rejected = 0, cancelled = 0, finished = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0, steps = 0, step_tokens = 0;
  // Speculative decoding: draft tokens evaluated, kept, and verification steps (a slot's pending
  // token with a draft).
  uint64_t draft_tokens = 0, draft_accepted = 0, draft_steps = 0;
  double prompt_s = 0, decode_s = 0;  // step time shared out by the step's tokens
  int queue_depth = 0, slots_busy = 0, slots = 0;
  // At the moment metrics() is read: requests with a sequence in a slot, and the KV positions
  // the busy slots hold out of all the slots' (what an inference gateway balances on).
  int running_requests = 0;
  int64_t kv_positions_used = 0, kv_positions = 0;
};

class BatchScheduler {
 public:
  // Schedules on `session`'s sequences (its n_seq slots); starts the step thread.
  BatchScheduler(const Model& model, Session& session, SchedulerOptions options = {});
  ~BatchScheduler();  // stop()
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Queues the request; null when max_queue requests already wait for a slot (a server
  // answers 503). Fails (strata::Error) on an empty prompt, one that does not fit a slot's
  // context, or token ids outside the vocabulary.
  std::shared_ptr<JobHandle> submit(JobRequest request);
  // Cancels every job and ends the step thread.
  void stop();

  SchedulerMetrics metrics() const;
  std::vector<SlotStatus> slots() const;
  int n_slots() const { return session_.n_seq(); }
  int64_t slot_context() const { return session_.n_ctx(); }

 private:
  struct Job;
  struct Sequence;
  void run();
  bool has_work() const;  // with m_ held
  int busy_slots() const;
  void cancel_unplaced(Job& job);
  void admit();           // with m_ held
  void drop_cancelled();  // with m_ held
  void step();
  // The drafts of the generating sequences (empty where none), by their order in `generating`.
  std::vector<std::vector<int32_t>> draft_for(std::span<Sequence* const> generating);
  // A generating sequence's rows (its pending token's, then its draft's): draws in order while
  // the draft holds; the slot keeps what was kept. Returns the tokens drawn. With m_ held.
  int64_t on_draft_rows(Sequence& s, std::span<const int32_t> draft, std::span<const float> rows,
                        int64_t n_past_before);
  // sample_next, its failure its own. `drafted`: the draft's token at this row (-1: none).
  // Returns the token drawn (-1: none).
  int32_t on_logits(Sequence& s, std::span<const float> logits, int32_t drafted = -1);
  int32_t sample_next(Sequence& s, std::span<const float> logits, int32_t drafted);
  void fail_unplaced(Job& job, const std::string& error);
  void release_followers(Sequence& leader, std::span<const float> logits);
  void finish(Sequence& s, const char* reason);
  void finish_embedding(Sequence& s);  // its prompt read: the pooled vector, then finish()
  void deliver(Sequence& s, std::string_view text);

  const Model& model_;
  Session& session_;
  SchedulerOptions options_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  // Jobs with choices not yet in a slot, in arrival order (a job stays until all are placed).
  std::deque<std::shared_ptr<Job>> waiting_;
  std::vector<std::unique_ptr<Sequence>> slots_;  // by slot id; null: free
  std::vector<std::vector<int32_t>> cached_;      // per slot: the tokens its KV entries hold
  SchedulerMetrics metrics_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata
