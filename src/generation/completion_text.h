// The text of a completion as tokens are generated: token bytes appended, cut at the first
// stop string, and handed out only when final (never a partial UTF-8 character, never text that
// may turn out to begin a stop string). Shared by the one-sequence generator and the batch
// scheduler, so a request's text is the same whichever produced it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"

namespace strata {

class CompletionText {
 public:
  CompletionText(const Tokenizer& tokenizer, const std::vector<std::string>& stop);

  // Appends a generated token's bytes; true when a stop string has now appeared (the text is
  // cut before it and nothing more may be added).
  bool add(int32_t token);
  // The generation ended: a dangling partial character is dropped, the rest becomes final.
  void finish();
  // The final text not handed out before (empty when nothing new is final).
  std::string_view take();
  const std::string& text() const { return text_; }
  // The stop string that ended the text (empty while none has).
  const std::string& stopping_word() const { return stopping_word_; }

 private:
  const Tokenizer& tok_;
  const std::vector<std::string>& stop_;
  size_t longest_stop_ = 0;
  std::string text_;
  size_t final_ = 0;   // bytes of text_ that are final
  size_t handed_ = 0;  // bytes of text_ handed out by take()
  bool stopped_ = false;
  std::string stopping_word_;
};

// Length of the longest prefix of `text` that is whole UTF-8 characters (an incomplete final
// sequence is held back until its remaining bytes arrive).
size_t complete_utf8_prefix(std::string_view text);

}  // namespace strata
