// The OpenAI request validation (/v1/completions and /v1/chat/completions bodies) and the chat
// prompt rendering on arbitrary bytes: a body parses into a request or is refused with
// ApiError (status 400); nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/chat_prompt.h"
#include "server/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const strata::ServerDefaults defaults;
  for (bool chat : {false, true}) {
    try {
      const auto r = strata::parse_completion_request(body, chat, defaults);
      if (chat) {
        for (const char* tmpl : {"", "<|im_start|>", "[INST]", "<|start_header_id|>", "<|user|>"})
          strata::render_chat(r.messages, tmpl, "<s>", "</s>");
      }
    } catch (const strata::ApiError& e) {
      if (e.status != 400) std::abort();
    }
  }
  return 0;
}
