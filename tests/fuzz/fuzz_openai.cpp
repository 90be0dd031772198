// The OpenAI request validation (/v1/completions, /v1/chat/completions and /v1/embeddings bodies) and the chat
// prompt rendering by every built-in template on arbitrary bytes: a body parses into a request or
// is refused with ApiError (status 400); a template renders it or refuses it by its own
// raise_exception; nothing else may escape.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "chat/chat_template.h"
#include "server/embeddings_api.h"
#include "server/openai_api.h"
#include "server/token_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const strata::ServerDefaults defaults;
  for (bool chat : {false, true}) {
    try {
      const auto r = strata::parse_completion_request(body, chat, defaults);
      if (chat) {
        for (const auto& name : strata::ChatTemplate::builtin_names()) {
          try {
            strata::ChatTemplate::select(name, "", "<s>", "</s>").apply(r.messages);
          } catch (const strata::ChatTemplateRefusal&) {  // the template's own policy
          } catch (const std::runtime_error&) {
            // A template that never mentions tools meets a tool call's null content as text:
            // the server refuses such requests before rendering (prepare_tools); any other
            // render failure is a bug.
            const bool null_content = std::any_of(r.messages.begin(), r.messages.end(),
                                                  [](const auto& m) { return m.content_null; });
            if (!null_content) std::abort();
          }
        }
      }
    } catch (const strata::ApiError& e) {
      if (e.status != 400) std::abort();
    }
  }
  try {
    strata::parse_embedding_request(strata::parse_body(body), 64, 1000);
  } catch (const strata::ApiError& e) {
    if (e.status != 400) std::abort();
  }
  return 0;
}
