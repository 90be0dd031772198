#include "generation/completion_text.h"

#include <algorithm>

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

CompletionText::CompletionText(const Tokenizer& tokenizer, const std::vector<std::string>& stop)
    : tok_(tokenizer), stop_(stop) {
  for (const auto& s : stop_) longest_stop_ = std::max(longest_stop_, s.size());
}

bool CompletionText::add(int32_t token) {
  if (stopped_) return true;
  const size_t before = text_.size();
  if (tok_.has_text(token)) text_ += tok_.token_bytes(token);
  // A stop string can only start where it could overlap the new text.
  const size_t from = before > longest_stop_ ? before - longest_stop_ : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    if (s.empty()) continue;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos && at < cut) cut = at, stopping_word_ = s;
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  // Final text: whole characters, and nothing that may be the start of a stop string.
  size_t safe = complete_utf8_prefix(text_);
  if (!stopped_)
    for (const auto& s : stop_)
      for (size_t k = std::min(s.empty() ? 0 : s.size() - 1, text_.size()); k > 0; --k)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, text_.size() - k);
          break;
        }
  final_ = std::max(final_, safe);
  return stopped_;
}

void CompletionText::finish() {
  text_.resize(complete_utf8_prefix(text_));
  final_ = text_.size();
}

std::string_view CompletionText::take() {
  const std::string_view piece = std::string_view(text_).substr(handed_, final_ - handed_);
  handed_ = final_;
  return piece;
}

}  // namespace strata
