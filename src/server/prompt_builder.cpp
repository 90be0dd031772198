#include "server/prompt_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "chat/context_fit.h"
#include "chat/json_schema_grammar.h"
#include "chat/tool_calls.h"
#include "generation/grammar.h"

namespace strata {

void PromptBuilder::check_fits_before_tokenizing(const std::string& text, const char* param,
                                                 const std::string& what) const {
  const int64_t at_least = model_.tokenizer->min_tokens(text.size());
  if (at_least >= n_ctx_)
    throw ApiError(400,
                   fmt::format("{} has at least {} tokens ({} bytes) but the context holds {} "
                               "(start the server with a larger -c)",
                               what, at_least, text.size(), n_ctx_),
                   param, "context_length_exceeded");
}

void PromptBuilder::check_context(size_t tokens, const std::string& what, const char* param) const {
  if (static_cast<int64_t>(tokens) >= n_ctx_)
    throw ApiError(400,
                   fmt::format("{} has {} tokens but the context holds {} (start the server "
                               "with a larger -c)",
                               what, tokens, n_ctx_),
                   param, "context_length_exceeded");
}

void PromptBuilder::check_vocabulary(int32_t id, const char* what, const char* param) const {
  if (id >= model_.config.n_vocab)
    throw ApiError(
        400,
        fmt::format("{} {} is outside the vocabulary (0..{})", what, id, model_.config.n_vocab - 1),
        param);
}

// A request with tools: the style the template writes calls in, and for a required call (any
// tool, or the named one) the grammar that makes the reply one call.
void PromptBuilder::prepare_tools(CompletionRequest& req) const {
  // A template that never mentions tools would drop them (and meet a null content where it
  // expects text): refused rather than ignored.
  const bool tool_messages =
      std::any_of(req.messages.begin(), req.messages.end(),
                  [](const ChatMessage& m) { return m.role == "tool" || m.content_null; });
  if ((req.tools_active() || tool_messages) && template_.source().find("tool") == std::string::npos)
    throw ApiError(400,
                   fmt::format("the chat template '{}' has no place for tools or tool calls; "
                               "start the server with one that has (--chat-template FILE)",
                               template_.name()),
                   req.tools_active() ? "tools" : "messages");
  if (!req.tools_active()) return;
  req.tool_style = tool_call_style(template_.source());
  if (req.tool_choice != "required" && req.tool_choice != "function") return;
  try {
    req.generation.grammar = std::make_shared<const Grammar>(
        Grammar::parse(tool_call_grammar(req.tool_style, req.tools, req.tool_function)));
  } catch (const SchemaError& e) {
    throw ApiError(
        400, fmt::format("a tool's parameters: {} (keyword '{}')", e.what(), e.keyword()), "tools");
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("the tools' call grammar: {}", e.what()), "tools");
  }
  req.grammar_param = "tools";
}

ChatPrompt PromptBuilder::render(const CompletionRequest& req,
                                 const std::vector<ChatMessage>& messages,
                                 const jinja::RenderLimits& limits) const {
  try {
    jinja::Dict extra;
    if (req.tools_active()) extra.set("tools", jinja::from_json(req.tools));
    return template_.apply(message_values(messages), extra, true, limits);
  } catch (const ChatTemplateRefusal& e) {
    throw ApiError(400, e.what(), "messages");
  } catch (const std::runtime_error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::vector<int32_t> PromptBuilder::tokens_of(const ChatPrompt& p) const {
  const Tokenizer& tok = *model_.tokenizer;
  // A template that writes the BOS itself ({{ bos_token }}) gets no second one.
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : std::string();
  const bool has_bos = !bos.empty() && p.text.compare(0, bos.size(), bos) == 0;
  return tok.encode(p.text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

std::vector<int32_t> PromptBuilder::chat_tokens(CompletionRequest& req,
                                                const jinja::RenderLimits& limits) const {
  prepare_tools(req);
  // A conversation too long for the context loses its oldest turns (chat/context_fit.h), so
  // that the reply has room; each candidate's prompt kept by its message count.
  std::map<size_t, std::pair<ChatPrompt, std::vector<int32_t>>> tried;
  const auto length = [&](const std::vector<ChatMessage>& messages) -> size_t {
    ChatPrompt p = render(req, messages, limits);
    if (model_.tokenizer->min_tokens(p.text.size()) >= n_ctx_) return SIZE_MAX;  // not tokenized
    auto ids = tokens_of(p);
    const size_t n = ids.size();
    tried[messages.size()] = {std::move(p), std::move(ids)};
    return n;
  };
  const int64_t reserve = reply_reserve(n_ctx_, req.generation.max_tokens);
  const ChatFit fit =
      fit_chat(req.messages, static_cast<size_t>(std::max<int64_t>(1, n_ctx_ - reserve)), length);
  req.messages = fit.messages;
  req.dropped_messages = fit.dropped;
  auto it = tried.find(req.messages.size());
  if (it == tried.end()) {  // the whole conversation, longer than the context: said by size
    const ChatPrompt p = render(req, req.messages, limits);
    check_fits_before_tokenizing(p.text, "messages", "the prompt");
    it = tried.emplace(req.messages.size(), std::pair{p, tokens_of(p)}).first;
  }
  for (auto& s : it->second.first.stop) req.generation.stop.push_back(std::move(s));
  req.think_split =
      req.reasoning_format != ReasoningFormat::None && template_thinks(template_.source());
  req.think_open = req.think_split && prompt_opens_thinking(it->second.first.text);
  return std::move(it->second.second);
}

std::vector<int32_t> PromptBuilder::prompt_tokens(CompletionRequest& req,
                                                  const jinja::RenderLimits& limits) const {
  const Tokenizer& tok = *model_.tokenizer;
  std::vector<int32_t> ids;
  if (req.chat) {
    ids = chat_tokens(req, limits);
  } else if (!req.prompt_ids.empty()) {
    ids = req.prompt_ids;
    for (int32_t t : ids) check_vocabulary(t, "prompt token id", "prompt");
  } else {
    check_fits_before_tokenizing(req.prompt, "prompt", "the prompt");
    ids = tok.encode(req.prompt, /*add_special=*/true);
  }
  if (ids.empty()) throw ApiError(400, "the prompt is empty", req.chat ? "messages" : "prompt");
  for (const auto& [id, bias] : req.generation.sampling.logit_bias)
    check_vocabulary(id, "logit_bias token id", "logit_bias");
  check_context(ids.size(), "the prompt", req.chat ? "messages" : "prompt");
  return ids;
}

std::vector<int32_t> PromptBuilder::input_tokens(const std::string& text, size_t i) const {
  check_fits_before_tokenizing(text, "input", fmt::format("input {}", i));
  const Tokenizer& tok = *model_.tokenizer;
  return tok.encode(text, /*add_special=*/true);
}

}  // namespace strata
