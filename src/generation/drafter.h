// Where speculative decoding's drafts come from (generation/speculative.h): tokens likely to
// follow a sequence, which the target then checks in one batch. Prompt lookup finds them in the
// sequence itself; a draft model (a smaller model with the target's vocabulary) decodes them
// greedily, several sequences in one batch, as llama.cpp's draft-simple does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "runtime/session.h"

namespace strata {

// One sequence's ask: up to `max` tokens to follow `history`, whose last token is the pending
// one (drawn, not yet evaluated by the target). `seq`: the sequence's slot (a server's); two
// requests of one call name different slots.
struct DraftRequest {
  int seq = 0;
  std::span<const int32_t> history;
  int max = 0;
  std::vector<int32_t>* out = nullptr;  // the draft, cleared first (empty: none)
  float p_min = -1;  // a draft model's confidence to go on (< 0: the drafter's own)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void draft(std::span<const DraftRequest> requests) = 0;
  virtual const char* kind() const = 0;          // for reports: "prompt lookup", "draft model"
  virtual uint64_t passes() const { return 0; }  // a draft model's batches evaluated
  // A slot's state is dropped (its sequence starts over).
  virtual void forget(int seq) {}
  // Reads a slot's history but its last token ahead of drafting (a draft model's prompt, which a
  // benchmark keeps out of its decode timer).
  virtual void prepare(int seq, std::span<const int32_t> history) {}
  // One sequence (slot 0).
  std::vector<int32_t> draft_one(std::span<const int32_t> history, int max);
};

// Prompt lookup (n-gram) drafting: the longest suffix of `history` of ngram_max down to ngram_min
// tokens that also occurs earlier in it, and the tokens that followed it there, at most `max`:
// at its most recent earlier place with `max` tokens after it, else at the place with the most
// (a loop of one token drafts `max` of it, not the one token after its last repeat). Empty when
// no suffix recurs.
std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int ngram_min, int ngram_max,
                                  int max);

class LookupDrafter : public Drafter {
 public:
  LookupDrafter(int ngram_min, int ngram_max);  // fails unless 1 <= min <= max
  void draft(std::span<const DraftRequest> requests) override;
  const char* kind() const override { return "prompt lookup"; }

 private:
  int ngram_min_, ngram_max_;
};

// The draft model's choice at one position, as llama.cpp's draft sampler makes it: the most
// likely token, and its probability among the 10 most likely (a top-k of 10, then softmax).
struct DraftChoice {
  int32_t token = -1;
  float p = 0;
};
DraftChoice draft_choice(std::span<const float> logits);

// Why a draft model cannot draft for a target, as llama.cpp's compatibility check decides:
// another tokenizer kind, other BOS/EOS use or ids, vocabularies more than 128 apart in size, or a
// token from id 5 on whose text differs. Empty when it can.
std::string draft_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft);

// --draft-p-min's value: a probability, 0 to 1 (one line otherwise); llama.cpp's default 0.
void check_draft_p_min(float p_min);

class ModelDrafter : public Drafter {
 public:
  // Drafts on `session` (the draft model's, one sequence per slot), keeping tokens while their
  // draft_choice probability is at least p_min and their ids are below target_vocab.
  ModelDrafter(Session& session, int32_t target_vocab, float p_min);
  void draft(std::span<const DraftRequest> requests) override;
  const char* kind() const override { return "draft model"; }
  uint64_t passes() const override { return passes_; }
  void forget(int seq) override;
  void prepare(int seq, std::span<const int32_t> history) override;

 private:
  // Keeps the slot's cached tokens the history starts with, at most `most`; returns how many.
  size_t keep_prefix(int seq, std::span<const int32_t> history, size_t most);
  // Brings a slot's cache to the history but its last token; that one goes into batch_.
  void catch_up(const DraftRequest& r);

  Session& session_;
  int32_t target_vocab_;
  float p_min_;
  std::vector<std::vector<int32_t>> held_;  // per slot: the tokens the session's cache holds
  std::vector<BatchToken> batch_;
  std::vector<size_t> rows_;  // the requests the batch's logits rows belong to
  uint64_t passes_ = 0;
};

}  // namespace strata
