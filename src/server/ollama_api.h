// Ollama's HTTP API, what Open WebUI, editors and agents speak: /api/chat and /api/generate read
// as the request strata serves (parse_completion_request's OpenAI body, so one set of checks
// and one scheduler path), their replies in Ollama's shapes (one JSON object, or NDJSON lines
// ending in a "done" line with counts and durations), and /api/tags, /api/show, /api/ps,
// /api/version describing the one model served. Errors are Ollama's {"error": "..."}. What
// Ollama takes and strata does not honour (images, templates, load-time options, unloading)
// is a 400 naming the field, never ignored.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "generation/generator.h"
#include "server/openai_api.h"

namespace strata {

// The Ollama API version whose endpoints strata answers (clients check it before using
// structured outputs and tools).
inline constexpr const char* kOllamaApiVersion = "0.12.6";

struct OllamaRequest {
  nlohmann::json openai;   // the body parse_completion_request reads
  bool chat_reply = true;  // /api/chat's reply shape, else /api/generate's
  bool stream = true;      // Ollama streams unless "stream": false
  bool load_only = false;  // /api/generate without a prompt: Ollama's "load the model" call
};

// `chat_endpoint`: /api/chat, else /api/generate. `max_context`: the positions a request may use
// (options.num_ctx above it is refused). ApiError (400) naming the field strata does not honour.
OllamaRequest translate_ollama_request(const nlohmann::json& body, bool chat_endpoint,
                                       int64_t max_context);

// /api/embed ({"input": text or texts}) and the older /api/embeddings ({"prompt": text}) as the
// OpenAI embeddings body; ApiError (400) naming the field. `truncate: false` is taken (strata
// refuses an input longer than the context rather than cutting it either way).
nlohmann::json translate_ollama_embed(const nlohmann::json& body, bool legacy);
// OpenAI's embeddings answer in Ollama's shape: {"model", "embeddings": [[...]],
// "prompt_eval_count", durations}, or legacy {"embedding": [...]}.
nlohmann::json ollama_embed_reply(const nlohmann::json& openai_reply, const std::string& model, bool legacy,
                                  double seconds);

// Time as Ollama writes it: RFC 3339 in UTC with nanoseconds.
std::string ollama_time_now();

// What the replies carry besides the text: the model's name and when the reply was made.
struct OllamaStamp {
  std::string model;
  std::string created_at;
};

// The whole reply to a request that ended: chat {"message": {role, content[, tool_calls]}} or
// generate {"response"}, with "done": true, "done_reason" and counts and durations (ns).
nlohmann::json ollama_reply(const CompletionRequest& req, const CompletionIds& ids, const OllamaStamp& stamp,
                            bool chat_reply, const GenerationResult& result);
// One streamed line with a piece of text ("done": false).
nlohmann::json ollama_chunk(const OllamaStamp& stamp, bool chat_reply, const std::string& text);
// The reply to /api/generate's load call.
nlohmann::json ollama_loaded(const OllamaStamp& stamp);
// Ollama's tool calls ({"function": {"name", "arguments": object}}) from an OpenAI message's.
nlohmann::json ollama_tool_calls(const nlohmann::json& openai_calls);

// The one model served, as /api/tags, /api/ps and /api/show describe it.
struct OllamaModel {
  std::string name;
  std::string architecture;
  uint64_t file_bytes = 0;
  std::string modified_at;       // the file's time, RFC 3339
  std::string quantization;      // e.g. Q4_0, F16, "Q4_K (mixed)"
  uint64_t parameters = 0;       // weights counted
  int64_t context_length = 0;    // the context served
  int64_t embedding_length = 0;
  std::string chat_template;     // the template's text
  std::string digest;            // sha256 of the description above (Ollama's is its manifest's)
  bool tools = false;            // the template takes tools
};
nlohmann::json ollama_tags(const OllamaModel& m);
nlohmann::json ollama_ps(const OllamaModel& m);
nlohmann::json ollama_show(const OllamaModel& m);
// "1.1B", "350M", "14.8B" as Ollama shows parameter counts.
std::string ollama_parameter_size(uint64_t parameters);

}  // namespace strata
