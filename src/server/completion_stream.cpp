#include "server/completion_stream.h"

#include <algorithm>
#include <string>
#include <vector>

namespace strata {

using nlohmann::json;

namespace {

using Send = std::function<bool(const json&)>;

// A chat chunk whose delta is the reply's thoughts (llama-server's reasoning_content).
bool send_reasoning(const CompletionRequest& req, const CompletionIds& cid, const std::string& text,
                    int choice, const json& logprobs, const Send& send) {
  json chunk = completion_chunk(req, cid, "", "", choice, logprobs);
  chunk["choices"][0]["delta"] = {{"reasoning_content", text}};
  return send(chunk);
}

// A piece of text split into thoughts and answer as far as it is certain (the rest held by the
// splitter): a reasoning chunk, a content chunk, each only where it has text (the piece's
// logprobs on the last sent, or on an empty content delta where all of it is held).
bool send_split(const CompletionRequest& req, const CompletionIds& cid, const ReasoningReply& d,
                int choice, const json& logprobs, const Send& send) {
  const bool content = !d.content.empty() || (d.reasoning.empty() && !logprobs.is_null());
  if (!d.reasoning.empty() &&
      !send_reasoning(req, cid, d.reasoning, choice, content ? json() : logprobs, send))
    return false;
  return !content || send(completion_chunk(req, cid, d.content, "", choice, logprobs));
}

// With tools, each choice's reply is sent whole at the end: OpenAI's shape, its thoughts first
// where it has some, the calls in one delta, each with its index, then the finish chunk.
// `finish` becomes "tool_calls" for a call.
bool send_tool_replies(const CompletionRequest& req, const CompletionIds& cid,
                       const std::vector<std::string>& held, std::vector<std::string>& finish,
                       const Send& send) {
  for (size_t i = 0; i < held.size() && i < finish.size(); ++i) {
    const ReasoningReply said = req.split(held[i]);
    if (!said.reasoning.empty() &&
        !send_reasoning(req, cid, said.reasoning, static_cast<int>(i), json(), send))
      return false;
    ToolReply t = tool_reply(req, cid, said.content, static_cast<int>(i));
    json chunk = completion_chunk(req, cid, "", "", static_cast<int>(i));
    json& delta = chunk["choices"][0]["delta"];
    delta = json::object();
    if (!t.message["content"].is_null()) delta["content"] = t.message["content"];
    if (t.called) {
      json calls = t.message["tool_calls"];
      for (size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
      delta["tool_calls"] = std::move(calls);
      finish[i] = "tool_calls";
    }
    if (!send(chunk)) return false;
  }
  return true;
}

}  // namespace

bool stream_completion(const CompletionRequest& req, JobHandle& job, const CompletionIds& cid,
                       httplib::DataSink& sink, const StreamContext& context) {
  auto send = [&](const json& j) {
    const std::string event = "data: " + dump_json(j) + "\n\n";
    return sink.write(event.data(), event.size());
  };
  if (req.chat)
    for (int i = 0; i < req.n; ++i) {
      json first = completion_chunk(req, cid, "", "", i);
      first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
      if (!send(first)) return false;
    }
  std::vector<JobHandle::Piece> pieces;
  std::vector<int64_t> sent_bytes(static_cast<size_t>(req.n), 0);  // per choice: text_offset
  std::vector<std::string> held(static_cast<size_t>(req.n));       // with tools: the whole text
  std::vector<ReasoningStream> thoughts(static_cast<size_t>(req.n),
                                        ReasoningStream(req.think_open));
  bool done = false, probed = false;
  while (!done) {
    // Short waits: a client gone while its request waits for a slot is found within 10 ms.
    done = job.wait(pieces, std::chrono::milliseconds(10));
    for (const JobHandle::Piece& p : pieces) {
      if (req.tools_active()) {  // sent whole at the end: it may be a call, not text
        held[static_cast<size_t>(p.choice)] += p.text;
        continue;
      }
      int64_t& offset = sent_bytes[static_cast<size_t>(p.choice)];
      const json logprobs = req.generation.logprobs >= 0
                                ? logprobs_json(req.chat, p.logprobs, context.token_text, offset)
                                : json();
      offset += static_cast<int64_t>(p.text.size());
      if (req.think_split) {
        const ReasoningReply d = thoughts[static_cast<size_t>(p.choice)].feed(p.text);
        if (!send_split(req, cid, d, p.choice, logprobs, send)) return false;
        continue;
      }
      if (!send(completion_chunk(req, cid, p.text, "", p.choice, logprobs))) return false;
    }
    pieces.clear();
    // The client sent its FIN: half-closed (it still reads) or gone. An SSE comment, which
    // clients ignore, draws a gone client's reset at once, so that a request waiting for a
    // slot is dropped then, not after its first token (dead streams filled the queue).
    if (!done && !probed && context.half_closed()) {
      probed = true;
      const std::string ping = ": ping\n\n";
      if (!sink.write(ping.data(), ping.size())) return false;
    }
    if (!done && context.abandoned()) {
      // The headers (200) are sent: the stream ends with an error event saying why.
      if (context.stopping())
        send(error_body(503, "the server is stopping; the generation was cut"));
      return false;
    }
  }
  if (const GenerationResult* failed = job.first_failure()) {
    send(failed->request_fault ? error_body(400, failed->error, req.grammar_param)
                               : error_body(500, "internal error: " + failed->error));
    return false;
  }
  const auto& results = job.results();
  std::vector<std::string> finish(results.size());
  for (size_t i = 0; i < results.size(); ++i) finish[i] = results[i].finish_reason;
  if (req.tools_active() && !send_tool_replies(req, cid, held, finish, send)) return false;
  if (req.think_split && !req.tools_active())  // what the splitters still hold
    for (size_t i = 0; i < thoughts.size(); ++i) {
      const ReasoningReply d = thoughts[i].finish();
      if ((!d.reasoning.empty() || !d.content.empty()) &&
          !send_split(req, cid, d, static_cast<int>(i), json(), send))
        return false;
    }
  for (size_t i = 0; i < results.size(); ++i) {
    json last = completion_chunk(req, cid, "", finish[i], static_cast<int>(i));
    if (req.include_usage && i + 1 == results.size()) last["usage"] = usage_json(results);
    if (i + 1 == results.size()) last["timings"] = timings_json(results);
    if (req.dropped_messages > 0) last["dropped_messages"] = req.dropped_messages;
    if (!send(last)) return false;
  }
  const std::string end = "data: [DONE]\n\n";
  sink.write(end.data(), end.size());
  sink.done();
  return true;
}

}  // namespace strata
