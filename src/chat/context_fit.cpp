#include "chat/context_fit.h"

#include <algorithm>

namespace strata {

namespace {

// The messages with every system message and the others from index `cut` on.
std::vector<ChatMessage> kept_from(const std::vector<ChatMessage>& messages, size_t cut) {
  std::vector<ChatMessage> kept;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "system" || i >= cut) kept.push_back(messages[i]);
  return kept;
}

size_t dropped_before(const std::vector<ChatMessage>& messages, size_t cut) {
  size_t n = 0;
  for (size_t i = 0; i < cut; ++i) n += messages[i].role != "system";
  return n;
}

}  // namespace

ChatFit fit_chat(const std::vector<ChatMessage>& messages, size_t limit,
                 const std::function<size_t(const std::vector<ChatMessage>&)>& tokens_of) {
  if (messages.empty() || tokens_of(messages) <= limit) return {messages, 0};
  // Where the kept turns may start: a user message with a turn before it, up to the last one.
  std::vector<size_t> cuts;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user" && dropped_before(messages, i) > 0) cuts.push_back(i);
  if (cuts.empty()) return {messages, 0};
  // The fewest turns dropped that fit (a prompt only shortens as turns go): binary search.
  size_t lo = 0, hi = cuts.size() - 1;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (tokens_of(kept_from(messages, cuts[mid])) <= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return {kept_from(messages, cuts[lo]), dropped_before(messages, cuts[lo])};
}

int64_t reply_reserve(int64_t n_ctx, int64_t max_tokens) {
  const int64_t quarter = n_ctx / 4;
  return max_tokens > 0 ? std::min(max_tokens, quarter) : quarter;
}

}  // namespace strata
