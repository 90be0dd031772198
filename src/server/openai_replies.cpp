// The replies of the OpenAI API (openai_api.h): usage, logprobs in each API's shape, a reply's
// tool calls, whole responses and stream chunks. Requests are read in openai_api.cpp.
#include <fmt/format.h>

#include <functional>
#include <string>

#include "server/openai_api.h"

namespace strata {

using nlohmann::json;

json timings_json(std::span<const GenerationResult> choices) {
  int64_t predicted = 0;
  double decode_s = 0;
  for (const GenerationResult& r : choices) {
    predicted += r.completion_tokens;
    decode_s = std::max(decode_s, r.decode_s);
  }
  const GenerationResult& first = choices.front();
  const int64_t evaluated = first.prompt_tokens - first.cached_tokens;
  json t = {{"queued_ms", 1e3 * first.queued_s},
            {"prompt_n", evaluated},
            {"prompt_ms", 1e3 * first.prompt_s},
            {"prompt_per_second", first.prompt_s > 0 ? evaluated / first.prompt_s : 0.0},
            {"predicted_n", predicted},
            {"predicted_ms", 1e3 * decode_s},
            {"predicted_per_second", decode_s > 0 ? predicted / decode_s : 0.0}};
  // Speculative decoding's, as llama-server reports them (only where a draft was made).
  int64_t drafted = 0, accepted = 0;
  for (const GenerationResult& r : choices) drafted += r.draft_tokens, accepted += r.draft_accepted;
  if (drafted > 0) {
    t["draft_n"] = drafted;
    t["draft_n_accepted"] = accepted;
  }
  return t;
}

json usage_json(std::span<const GenerationResult> choices) {
  const GenerationResult& first = choices.front();
  int64_t completion = 0;
  for (const GenerationResult& r : choices) completion += r.completion_tokens;
  return {{"prompt_tokens", first.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}};
}

json logprobs_json(bool chat, std::span<const TokenLogprob> tokens, const TokenText& text,
                   int64_t offset) {
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (const char c : s) b.push_back(static_cast<unsigned char>(c));
    return b;
  };
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      const std::string piece = text(t.id);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string alt = text(id);
        top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes_of(alt)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", t.logprob},
                         {"bytes", bytes_of(piece)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json pieces = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string piece = text(t.id);
    pieces.push_back(piece);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[text(id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(piece.size());
  }
  return {{"tokens", std::move(pieces)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

namespace {

// A tool call's id: 9 letters and digits (what Mistral's template demands of ids fed back),
// from the response id, the choice and the call's place, so a reply's ids are stable.
std::string tool_call_id(const CompletionIds& ids, int choice, size_t k) {
  static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t h = std::hash<std::string>{}(fmt::format("{}/{}/{}", ids.id, choice, k));
  std::string id;
  for (int i = 0; i < 9; ++i, h /= 62) id += digits[h % 62];
  return id;
}

}  // namespace

ToolReply tool_reply(const CompletionRequest& req, const CompletionIds& ids,
                     const std::string& text, int choice) {
  ParsedReply parsed = parse_tool_calls(req.tool_style, text, req.tools);
  if (!req.parallel_tool_calls && parsed.calls.size() > 1) parsed.calls.resize(1);
  ToolReply r;
  r.message = {{"role", "assistant"}};
  if (parsed.calls.empty()) {
    r.message["content"] = text;
    return r;
  }
  r.message["content"] = parsed.content.empty() ? json() : json(parsed.content);
  json calls = json::array();
  for (size_t k = 0; k < parsed.calls.size(); ++k)
    calls.push_back(
        {{"id", tool_call_id(ids, choice, k)},
         {"type", "function"},
         {"function", {{"name", parsed.calls[k].name}, {"arguments", parsed.calls[k].arguments}}}});
  r.message["tool_calls"] = std::move(calls);
  r.called = true;
  return r;
}

json completion_response(const CompletionRequest& req, const CompletionIds& ids,
                         std::span<const GenerationResult> choices, const TokenText& token_text) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationResult& r = choices[i];
    json choice = {{"index", i}, {"finish_reason", r.finish_reason}};
    const bool asked = req.generation.logprobs >= 0 && token_text;
    const json logprobs = asked ? logprobs_json(req.chat, r.logprobs, token_text) : json();
    if (req.chat) {
      const ReasoningReply said = req.split(r.text);
      choice["message"] = {{"role", "assistant"}, {"content", said.content}};
      if (req.tools_active()) {
        ToolReply t = tool_reply(req, ids, said.content, static_cast<int>(i));
        choice["message"] = std::move(t.message);
        if (t.called) choice["finish_reason"] = "tool_calls";
      }
      if (!said.reasoning.empty()) choice["message"]["reasoning_content"] = said.reasoning;
      if (asked) choice["logprobs"] = logprobs;
    } else {
      choice["text"] = r.text;
      choice["logprobs"] = logprobs;
    }
    list.push_back(std::move(choice));
  }
  json reply = {{"id", ids.id},
                {"object", req.chat ? "chat.completion" : "text_completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", std::move(list)},
                {"usage", usage_json(choices)},
                {"timings", timings_json(choices)}};
  // strata's note: the oldest turns of a conversation too long for the context were left out.
  if (req.dropped_messages > 0) reply["dropped_messages"] = req.dropped_messages;
  return reply;
}

json completion_chunk(const CompletionRequest& req, const CompletionIds& ids,
                      const std::string& delta, const std::string& finish_reason, int index,
                      const json& logprobs) {
  json choice = {{"index", index},
                 {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)}};
  if (req.chat) {
    choice["delta"] = finish_reason.empty() ? json{{"content", delta}} : json::object();
    if (!logprobs.is_null()) choice["logprobs"] = logprobs;
  } else {
    choice["text"] = delta;
    choice["logprobs"] = logprobs;
  }
  return {{"id", ids.id},
          {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace strata
