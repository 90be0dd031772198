#include "runtime/generator.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace strata {

size_t complete_utf8_prefix(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the last lead byte and check its length.
  size_t i = text.size();
  int continuation = 0;
  while (i > 0 && continuation < 3 && (static_cast<uint8_t>(text[i - 1]) & 0xC0) == 0x80)
    --i, ++continuation;
  if (i == 0) return text.size();
  const auto lead = static_cast<uint8_t>(text[i - 1]);
  const int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  return need > continuation ? i - 1 : text.size();
}

Generator::Generator(const Model& model, Session& session) : model_(model), session_(session) {
  if (!model.tokenizer) fail("text generation needs a model with a tokenizer");
}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt,
                                     const GenerationParams& params,
                                     const std::function<bool(std::string_view)>& on_text) {
  const Tokenizer& tok = *model_.tokenizer;
  const int64_t n_ctx = session_.n_ctx();
  if (prompt.empty()) fail("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx)
    fail("the prompt has {} tokens but the context holds {}", prompt.size(), n_ctx);
  for (int32_t t : prompt)
    if (t < 0 || t >= model_.config.n_vocab)
      fail("token id {} is outside the vocabulary (0..{})", t, model_.config.n_vocab - 1);

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
  std::vector<int32_t> history = prompt;
  size_t emitted = 0;  // bytes of r.text handed to on_text
  size_t longest_stop = 0;
  for (const auto& s : params.stop) longest_stop = std::max(longest_stop, s.size());
  Timer decode_timer;
  r.finish_reason = "length";
  auto emit = [&](size_t upto) {
    if (upto > emitted && on_text &&
        !on_text(std::string_view(r.text).substr(emitted, upto - emitted)))
      r.cancelled = true;
    emitted = std::max(emitted, upto);
  };
  while (params.max_tokens < 0 || r.completion_tokens < params.max_tokens) {
    const int32_t next = sampler.sample(logits, history);
    if (next == tok.eos()) {
      r.finish_reason = "stop";
      break;
    }
    history.push_back(next);
    ++r.completion_tokens;
    const size_t before = r.text.size();
    if (tok.has_text(next)) r.text += tok.token_bytes(next);
    // A stop string can only start where it could overlap the new text.
    bool stopped = false;
    const size_t from = before > longest_stop ? before - longest_stop : 0;
    size_t cut = std::string::npos;
    for (const auto& s : params.stop) {
      if (s.empty()) continue;
      const size_t at = r.text.find(s, from);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      r.text.resize(cut);
      stopped = true;
    }
    // Final text: whole characters, and nothing that may be the start of a stop string.
    size_t safe = complete_utf8_prefix(r.text);
    if (!stopped)
      for (const auto& s : params.stop)
        for (size_t k = std::min(s.empty() ? 0 : s.size() - 1, r.text.size()); k > 0; --k)
          if (r.text.compare(r.text.size() - k, k, s, 0, k) == 0) {
            safe = std::min(safe, r.text.size() - k);
            break;
          }
    emit(safe);
    if (stopped) {
      r.finish_reason = "stop";
      break;
    }
    if (r.cancelled) break;
    if (session_.n_past() >= n_ctx) break;  // context full: "length"
    const auto out = session_.eval(next);
    logits.assign(out.begin(), out.end());
    cached_.push_back(next);
  }
  r.decode_s = decode_timer.seconds();
  if (!r.cancelled) {
    r.text.resize(complete_utf8_prefix(r.text));  // a dangling partial character is dropped
    emit(r.text.size());
  }
  return r;
}

}  // namespace strata
