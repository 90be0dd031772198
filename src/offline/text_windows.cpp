#include "offline/text_windows.h"

#include <algorithm>

#include "core/error.h"
#include "core/input_file.h"

namespace strata {

int64_t run_text_windows(Session& session, const std::vector<int32_t>& tokens, int32_t bos,
                         int64_t max_tokens,
                         const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n_ctx = session.n_ctx();
  const int64_t total = std::min<int64_t>(static_cast<int64_t>(tokens.size()),
                                          max_tokens > 0 ? max_tokens : INT64_MAX);
  int64_t done = 0;
  std::vector<int32_t> window;
  while (done < total) {
    const int64_t n = std::min(n_ctx, total - done);
    window.assign(tokens.begin() + done, tokens.begin() + done + n);
    if (bos >= 0) window[0] = bos;
    session.reset();
    session.eval(window);
    done += n;
    if (progress) progress(done, total);
  }
  return done;
}

std::vector<int32_t> tokenize_text_file(const Model& model, const std::string& path) {
  const std::string text = read_regular_file(path, kMaxTextFileBytes, "text");
  if (model.tokenizer == nullptr)
    fail("'{}' has no tokenizer to read text with", model.file->path());
  auto tokens = model.tokenizer->encode(text, model.tokenizer->add_bos_default());
  if (tokens.size() < 2) fail("'{}' holds no text", path);
  return tokens;
}

}  // namespace strata
