// The OpenAI-compatible request and response bodies (/v1/completions, /v1/chat/completions):
// parsing with a clear error for every field that is wrong, and the JSON replies, whole or as
// server-sent-event chunks. HTTP itself lives in http_server.cpp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "server/chat_prompt.h"

namespace strata {

// A request the server refuses: HTTP status, message, and the field at fault (may be empty).
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string param, code;
};

// The OpenAI error body: {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

struct CompletionRequest {
  bool chat = false;
  std::string prompt;                 // completions: the text
  std::vector<int32_t> prompt_ids;    // completions: or token ids
  std::vector<ChatMessage> messages;  // chat
  GenerationParams generation;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;                   // choices, each its own sequence (choice i: seed + i)
};

inline constexpr int kMaxChoices = 16;

struct ServerDefaults {
  int64_t max_tokens = -1;  // when the request has none: until EOS or a full context
  SamplerParams sampling;   // temperature, top_k, ... when the request has none
};

// Throws ApiError (status 400) naming the field.
CompletionRequest parse_completion_request(const std::string& body, bool chat,
                                           const ServerDefaults& defaults);

struct CompletionIds {
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  int64_t created;    // seconds since the epoch
  std::string model;  // model name
};

// One result per choice, in order.
nlohmann::json completion_response(const CompletionRequest& req, const CompletionIds& ids,
                                   std::span<const GenerationResult> choices);
// One streamed chunk of choice `index`: a text delta, or (finish_reason non-empty) its last one.
nlohmann::json completion_chunk(const CompletionRequest& req, const CompletionIds& ids,
                                const std::string& delta, const std::string& finish_reason,
                                int index = 0);
// The prompt counted once, the choices' tokens added.
nlohmann::json usage_json(std::span<const GenerationResult> choices);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump_json(const nlohmann::json& j);

}  // namespace strata
