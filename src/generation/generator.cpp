#include "generation/generator.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/timer.h"
#include "generation/completion_text.h"
#include "generation/grammar_constraint.h"

namespace strata {

void check_prompt(std::span<const int32_t> prompt, int64_t n_vocab, int64_t n_ctx) {
  if (prompt.empty()) fail("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx)
    fail("the prompt has {} tokens but the context holds {}", prompt.size(), n_ctx);
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab)
      fail("token id {} is outside the vocabulary (0..{})", t, n_vocab - 1);
}

Generator::Generator(const Model& model, Session& session) : model_(model), session_(session) {
  if (!model.tokenizer) fail("text generation needs a model with a tokenizer");
}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt,
                                     const GenerationParams& params,
                                     const std::function<bool(std::string_view)>& on_text) {
  const Tokenizer& tok = *model_.tokenizer;
  const int64_t n_ctx = session_.n_ctx();
  check_prompt(prompt, model_.config.n_vocab, n_ctx);

  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  // Reuse the shared prefix, but evaluate at least the last prompt token for its logits.
  size_t keep = 0;
  const size_t limit =
      std::min({cached_.size(), prompt.size() - 1, static_cast<size_t>(session_.n_past())});
  while (keep < limit && cached_[keep] == prompt[keep]) ++keep;
  session_.truncate(static_cast<int64_t>(keep));
  cached_.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(keep));
  r.cached_tokens = static_cast<int64_t>(keep);

  Timer prompt_timer;
  std::vector<float> logits;
  {
    const std::span<const int32_t> rest(prompt.data() + keep, prompt.size() - keep);
    const auto out = session_.eval(rest);
    logits.assign(out.begin(), out.end());
    cached_.insert(cached_.end(), rest.begin(), rest.end());
  }
  r.prompt_s = prompt_timer.seconds();

  Sampler sampler(params.sampling);
  std::unique_ptr<GrammarConstraint> constraint;
  if (params.grammar) constraint = std::make_unique<GrammarConstraint>(params.grammar, tok);
  std::vector<int32_t> history = prompt;
  CompletionText text(tok, params.stop);
  Timer decode_timer;
  r.finish_reason = "length";
  auto emit = [&] {
    const std::string_view piece = text.take();
    if (!piece.empty() && on_text && !on_text(piece)) r.cancelled = true;
  };
  // Each drawn token (in history already, unless < 0: the grammar allows nothing): false when
  // the reply ends with it.
  auto take = [&](int32_t next) {
    if (next < 0 || next == tok.eos()) {
      r.finish_reason = "stop";
      return false;
    }
    ++r.completion_tokens;
    const bool stopped = text.add(next) || (constraint && constraint->finished());
    emit();
    if (stopped) r.finish_reason = "stop";
    return !stopped && !r.cancelled &&
           (params.max_tokens < 0 || r.completion_tokens < params.max_tokens);
  };
  auto draw = [&](std::span<const float> l) {
    const int32_t next = sampler.sample(l, history, constraint.get());
    if (next >= 0) history.push_back(next);
    return take(next);
  };
  std::optional<SpeculativeDecoder> spec;
  if (drafter_) spec.emplace(session_, sampler, constraint.get(), *drafter_, speculation_);
  bool go = params.max_tokens != 0 && draw(logits);
  while (go && session_.n_past() < n_ctx) {  // a full context: "length"
    if (spec)
      spec->step(history, [&](int32_t t) { return !(go = take(t)); });
    else
      go = draw(session_.eval(history.back()));
  }
  // The session holds the prompt and every drawn token it evaluated: a prefix of the history.
  cached_.assign(history.begin(), history.begin() + std::min<std::ptrdiff_t>(
                                                        static_cast<std::ptrdiff_t>(history.size()),
                                                        session_.n_past()));
  if (spec) {
    const SpeculationStats& s = spec->stats();
    stats_ += s;
    r.draft_tokens = static_cast<int64_t>(s.drafted);
    r.draft_accepted = static_cast<int64_t>(s.accepted);
  }
  r.decode_s = decode_timer.seconds();
  if (!r.cancelled) {
    text.finish();  // a dangling partial character is dropped
    emit();
  }
  r.text = text.text();
  r.stopping_word = text.stopping_word();
  return r;
}

void Generator::set_speculation(Drafter* drafter, const SpeculationParams& params) {
  if (drafter) check_speculation(params);
  drafter_ = drafter;
  speculation_ = params;
}

}  // namespace strata
