// How one API writes a completion's replies and errors: OpenAI's (JSON, server-sent events),
// Ollama's (JSON, NDJSON lines) and llama-server's /completion. The server parses a request
// into a CompletionRequest whatever its API, runs it on the scheduler the same way, and hands
// the results to the request's dialect.
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "generation/batch_scheduler.h"
#include "server/completion_stream.h"
#include "server/ollama_api.h"
#include "server/openai_api.h"

namespace strata {

class ReplyDialect {
 public:
  virtual ~ReplyDialect() = default;
  // The whole reply of a request that ended.
  virtual nlohmann::json whole(const CompletionRequest& req, const CompletionIds& ids,
                               std::span<const GenerationResult> results, const TokenText& token_text) const = 0;
  // Whether the reply is streamed, its content type, and the stream's writer (false when the
  // client is gone or the stream was cut).
  virtual bool streamed(const CompletionRequest& req) const { return req.stream; }
  virtual const char* stream_type() const { return "text/event-stream"; }
  virtual bool stream(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids,
                      httplib::DataSink& sink, const StreamContext& context) const = 0;
  // An error's body.
  virtual nlohmann::json error(int status, const std::string& message, const std::string& param = "",
                               const std::string& code = "") const {
    return error_body(status, message, param, code);
  }
};

// OpenAI's: completion_response, stream_completion, error_body.
std::shared_ptr<const ReplyDialect> openai_dialect();

// Ollama's /api/chat (chat_reply) or /api/generate replies, streamed unless asked not to be.
std::shared_ptr<const ReplyDialect> ollama_dialect(OllamaStamp stamp, bool chat_reply, bool stream);

// Ollama's error body: {"error": "..."}.
nlohmann::json ollama_error(const std::string& message);

// NDJSON lines of Ollama's reply until the job ends; false when the client is gone.
bool stream_ollama(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids,
                   const OllamaStamp& stamp, bool chat_reply, httplib::DataSink& sink,
                   const StreamContext& context);

}  // namespace strata
