// The OpenAI-compatible request and response bodies (/v1/completions, /v1/chat/completions):
// parsing with a clear error for every field that is wrong, and the JSON replies, whole or as
// server-sent-event chunks. HTTP itself lives in http_server.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "generation/generator.h"
#include "chat/chat_template.h"
#include "chat/reasoning.h"
#include "chat/tool_calls.h"

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
  size_t dropped_messages = 0;        // chat: the oldest turns left out for the context's sake
  GenerationParams generation;
  std::string grammar_param;  // the field generation.grammar came from: a grammar's error names it
  // chat: OpenAI's tools (null: none), what tool_choice asks (none, auto, required, or function:
  // then tool_function names it), and how the model writes calls (the server sets it from its
  // chat template).
  nlohmann::ordered_json tools;
  std::string tool_choice = "none", tool_function;
  bool parallel_tool_calls = true;
  ToolCallStyle tool_style = ToolCallStyle::Json;
  bool tools_active() const { return !tools.is_null() && tool_choice != "none"; }
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;                   // choices, each its own sequence (choice i: seed + i)
  // chat: llama-server's reasoning_format (the server's --reasoning-format unless the request
  // names one); the prompt builder sets think_split where the template writes <think> thoughts
  // (and the format is not none) and think_open where the prompt leaves them open.
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;
  bool think_split = false, think_open = false;
  // A reply's thoughts apart (reasoning_content) where think_split, else all content.
  ReasoningReply split(const std::string& text) const {
    return think_split ? split_reasoning(text, think_open) : ReasoningReply{"", text};
  }
};

inline constexpr int kMaxChoices = 16;

struct ServerDefaults {
  int64_t max_tokens = -1;  // when the request has none: until EOS or a full context
  SamplerParams sampling;   // temperature, top_k, ... when the request has none
  int64_t seed = -1;        // when the request has none (seed_choice.h): -1 draws one each time
  ReasoningFormat reasoning_format = ReasoningFormat::Auto;  // --reasoning-format
};

// Throws ApiError (status 400) naming the field.
CompletionRequest parse_completion_request(const std::string& body, bool chat,
                                           const ServerDefaults& defaults);

struct CompletionIds {
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  int64_t created;    // seconds since the epoch
  std::string model;  // model name
};

// A token's text in logprobs (the bytes it stands for).
using TokenText = std::function<std::string(int32_t)>;

// Tokens' logprobs as the endpoint shows them: completions {"tokens", "token_logprobs",
// "top_logprobs" (text: logprob), "text_offset" (from `offset`, the choice's text before them)};
// chat {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
nlohmann::json logprobs_json(bool chat, std::span<const TokenLogprob> tokens,
                             const TokenText& text, int64_t offset = 0);

// One result per choice, in order; with logprobs asked, each choice's (token_text names them).
nlohmann::json completion_response(const CompletionRequest& req, const CompletionIds& ids,
                                   std::span<const GenerationResult> choices,
                                   const TokenText& token_text = {});
// One streamed chunk of choice `index`: a text delta, or (finish_reason non-empty) its last one;
// `logprobs` (logprobs_json of the delta's tokens) where asked, else null.
nlohmann::json completion_chunk(const CompletionRequest& req, const CompletionIds& ids,
                                const std::string& delta, const std::string& finish_reason,
                                int index = 0, const nlohmann::json& logprobs = nullptr);
// The prompt counted once, the choices' tokens added.
nlohmann::json usage_json(std::span<const GenerationResult> choices);
// llama-server's extension: where a reply's time went (queued: waiting for a slot); in a whole
// reply and in a stream's last chunk.
nlohmann::json timings_json(std::span<const GenerationResult> choices);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
// The assistant message of a reply to a request with tools: its tool_calls (ids, names,
// arguments as JSON text) when the text holds calls in the template's style, else its text as
// content; called tells whether it holds calls (finish_reason "tool_calls").
struct ToolReply {
  nlohmann::json message;
  bool called = false;
};
ToolReply tool_reply(const CompletionRequest& req, const CompletionIds& ids, const std::string& text,
                     int choice);

std::string dump_json(const nlohmann::json& j);

}  // namespace strata
