// Chat messages to a prompt through a Jinja chat template, as Hugging Face's apply_chat_template
// and llama-server --jinja render it: the model's own (GGUF tokenizer.chat_template), a built-in
// one by name, or one from a file (`--chat-template NAME|FILE`). A model without a template
// gets the built-in "plain" transcript ("User: ...\nAssistant:"). The template is parsed and
// tried once on a sample conversation when chosen, so a template strata cannot run is an error
// at load, not at the first request.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat/jinja.h"

namespace strata {

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;  // system, user, assistant or tool
  std::string content;
  bool content_null = false;   // an assistant message with tool calls and no text: None
  jinja::Value tool_calls;     // an assistant's calls (a list), undefined when none
  std::string tool_call_id;    // a tool message: the call it answers
  std::string name;            // a tool message: the function's name
};

struct ChatPrompt {
  std::string text;               // ends where the assistant's reply starts
  std::vector<std::string> stop;  // end-of-turn markers the template uses
  std::string format;             // the template's name: "gguf", a built-in name or the file
};

// The template's own raise_exception (e.g. "Conversation roles must alternate"): the request's
// fault, so the server answers 400 with this message.
class ChatTemplateRefusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ChatTemplate {
 public:
  // spec: "" for the model's own template (model_template; the plain transcript when that is
  // empty), a built-in name (builtin_names()), or a file's path. Throws std::runtime_error with
  // one line naming the problem: unknown name, unreadable file, a parse error with its line, or
  // a failed trial render.
  static ChatTemplate select(const std::string& spec, const std::string& model_template,
                             std::string bos, std::string eos);

  // The prompt for `messages` (a list of message dicts) with `extra` variables (tools, ...).
  // ChatTemplateRefusal for the template's own raise_exception, std::runtime_error otherwise.
  // `limits`: memory lent to the render (jinja_budget.h).
  ChatPrompt apply(const jinja::Value& messages, const jinja::Dict& extra = {},
                   bool add_generation_prompt = true, const jinja::RenderLimits& limits = {}) const;
  ChatPrompt apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

  static std::vector<std::string> builtin_names();
  static const std::string* builtin_source(const std::string& name);  // null if unknown

 private:
  ChatTemplate(std::string name, std::string source, std::string bos, std::string eos);
  // The template's variables: messages, add_generation_prompt, bos_token, eos_token, then extra.
  jinja::Dict context(const jinja::Value& messages, const jinja::Dict& extra,
                      bool add_generation_prompt) const;

  std::shared_ptr<const jinja::Template> template_;
  std::string name_, source_, bos_, eos_;
  std::vector<std::string> stop_;
};

// Messages as the template sees them: [{"role": ..., "content": ...}, ...].
jinja::Value message_values(const std::vector<ChatMessage>& messages);

}  // namespace strata
