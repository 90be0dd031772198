// Text generation for a front end that serves many requests from one session: reuses the KV
// entries of the prompt prefix a request shares with the previous one, samples, stops at EOS, at
// stop strings or at a token limit, and hands out text as it becomes final (never a partial
// UTF-8 character, never text that may turn out to begin a stop string).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "generation/completion_text.h"
#include "generation/grammar.h"
#include "generation/sampler.h"
#include "generation/speculative.h"
#include "generation/token_logprobs.h"
#include "runtime/session.h"

namespace strata {

struct GenerationParams {
  int64_t max_tokens = 128;  // < 0: until EOS, a stop string or a full context
  SamplerParams sampling;
  std::vector<std::string> stop;  // the text ends before the first one generated
  // >= 0: each generated token's log-probability and this many alternatives
  // (generation/token_logprobs.h; the batch scheduler reports them); -1: none.
  int logprobs = -1;
  // Set: every token keeps the text within this grammar (response_format, grammar), EOS only
  // where the grammar may end; generation stops where it must end.
  std::shared_ptr<const Grammar> grammar;
  // Speculative decoding where the server drafts (llama-server's speculative.n_max, .n_min,
  // .p_min); < 0: the server's own.
  int draft_max = -1, draft_min = -1;
  float draft_p_min = -1;
};

struct GenerationResult {
  std::string text;
  std::string finish_reason;  // "stop": EOS or a stop string; "length": token limit or context
  std::string stopping_word;  // the stop string that ended it (empty: EOS, the grammar or length)
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double queued_s = 0, prompt_s = 0, decode_s = 0;  // waiting for a slot, prompt, decode
  bool cancelled = false;                           // on_text returned false (the client went away)
  std::string error;  // the engine failed (a batch scheduler's step threw), or the request did:
  bool request_fault = false;  // its own grammar ran past strata's limits mid-reply
  // With GenerationParams::logprobs: the tokens whose text was delivered, in order.
  std::vector<TokenLogprob> logprobs;
  int64_t draft_tokens = 0, draft_accepted = 0;  // speculative decoding's (llama-server's draft_n)
};

// Fails (strata::Error) when the prompt is empty, does not leave room for one generated token
// in n_ctx positions, or has a token id outside the vocabulary.
void check_prompt(std::span<const int32_t> prompt, int64_t n_vocab, int64_t n_ctx);

class Generator {
 public:
  Generator(const Model& model, Session& session);

  // on_text receives the text in order as it becomes final; returning false stops generation.
  // Fails (strata::Error) when the prompt is empty or does not fit the context.
  GenerationResult generate(const std::vector<int32_t>& prompt, const GenerationParams& params,
                            const std::function<bool(std::string_view)>& on_text = {});
  // Speculative decoding from here on (generation/speculative.h: the same text); `drafter`
  // outlives the generator. Null: plain decoding.
  void set_speculation(Drafter* drafter, const SpeculationParams& params);
  const SpeculationStats& speculation_stats() const { return stats_; }  // summed over replies

 private:
  const Model& model_;
  Session& session_;
  std::vector<int32_t> cached_;  // the tokens whose KV entries the session holds, in order
  Drafter* drafter_ = nullptr;
  SpeculationParams speculation_;
  SpeculationStats stats_;
};

}  // namespace strata
