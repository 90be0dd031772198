#include "server/reply_dialect.h"

#include <vector>

namespace strata {

using nlohmann::json;

namespace {

class OpenAiDialect final : public ReplyDialect {
 public:
  json whole(const CompletionRequest& req, const CompletionIds& ids, std::span<const GenerationResult> results,
             const TokenText& token_text) const override {
    return completion_response(req, ids, results, token_text);
  }
  bool stream(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids, httplib::DataSink& sink,
              const StreamContext& context) const override {
    return stream_completion(req, job, ids, sink, context);
  }
};

class OllamaDialect final : public ReplyDialect {
 public:
  OllamaDialect(OllamaStamp stamp, bool chat_reply, bool stream)
      : stamp_(std::move(stamp)), chat_reply_(chat_reply), stream_(stream) {}
  json whole(const CompletionRequest& req, const CompletionIds& ids, std::span<const GenerationResult> results,
             const TokenText&) const override {
    return ollama_reply(req, ids, stamp_, chat_reply_, results.front());
  }
  bool streamed(const CompletionRequest&) const override { return stream_; }
  const char* stream_type() const override { return "application/x-ndjson"; }
  bool stream(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids, httplib::DataSink& sink,
              const StreamContext& context) const override {
    return stream_ollama(req, job, ids, stamp_, chat_reply_, sink, context);
  }
  json error(int, const std::string& message, const std::string&, const std::string&) const override {
    return ollama_error(message);
  }

 private:
  OllamaStamp stamp_;
  bool chat_reply_, stream_;
};

}  // namespace

std::shared_ptr<const ReplyDialect> openai_dialect() {
  static const auto d = std::make_shared<const OpenAiDialect>();
  return d;
}

std::shared_ptr<const ReplyDialect> ollama_dialect(OllamaStamp stamp, bool chat_reply, bool stream) {
  return std::make_shared<const OllamaDialect>(std::move(stamp), chat_reply, stream);
}

json ollama_error(const std::string& message) { return {{"error", message}}; }

bool stream_ollama(const CompletionRequest& req, JobHandle& job, const CompletionIds& ids,
                   const OllamaStamp& stamp, bool chat_reply, httplib::DataSink& sink,
                   const StreamContext& context) {
  auto send = [&](const json& j) {
    const std::string line = dump_json(j) + "\n";
    return sink.write(line.data(), line.size());
  };
  std::vector<JobHandle::Piece> pieces;
  std::string held;  // with tools: the whole text, sent at the end (it may be a call)
  bool done = false;
  while (!done) {
    done = job.wait(pieces, std::chrono::milliseconds(10));
    for (const JobHandle::Piece& p : pieces) {
      if (req.tools_active()) held += p.text;
      else if (!send(ollama_chunk(stamp, chat_reply, p.text))) return false;
    }
    pieces.clear();
    if (!done && context.abandoned()) {
      if (context.stopping()) send(ollama_error("the server is stopping; the generation was cut"));
      return false;
    }
  }
  if (const GenerationResult* failed = job.first_failure()) {
    send(ollama_error(failed->request_fault ? failed->error : "internal error: " + failed->error));
    return false;
  }
  // The last line: Ollama's counts and durations; its text already went (with tools: all of it).
  json last = ollama_reply(req, ids, stamp, chat_reply, job.results().front());
  if (!req.tools_active()) {
    if (chat_reply) last["message"]["content"] = "";
    else last["response"] = "";
  }
  if (!send(last)) return false;
  sink.done();
  return true;
}

}  // namespace strata
