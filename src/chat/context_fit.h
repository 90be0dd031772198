// A conversation longer than its context keeps every system message and its newest turns: the
// oldest are dropped a turn at a time, what remains starting with a user message (as chat
// templates expect), never the last message. The server, the chat page (through the server)
// and `strata chat` decide it here and say how many messages they dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "chat/chat_template.h"

namespace strata {

struct ChatFit {
  std::vector<ChatMessage> messages;  // the kept ones, in order
  size_t dropped = 0;
};

// tokens_of(messages): the prompt's length through the template. `limit`: the most tokens the
// prompt may take. When even the last turn alone exceeds it, that turn is what comes back (the
// caller's context check then names its size): a last turn is never cut.
ChatFit fit_chat(const std::vector<ChatMessage>& messages, size_t limit,
                 const std::function<size_t(const std::vector<ChatMessage>&)>& tokens_of);

// The positions a reply keeps free when old turns must go: the request's max_tokens (<= 0: until
// the end) capped at a quarter of the context, so a long history leaves room to answer.
int64_t reply_reserve(int64_t n_ctx, int64_t max_tokens);

}  // namespace strata
