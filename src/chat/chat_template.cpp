#include "chat/chat_template.h"

#include <fmt/format.h>

#include "chat/builtin_templates.h"
#include "core/input_file.h"

namespace strata {

namespace {

// End-of-turn markers: a reply stops at the first the template uses (the generator stops at the
// EOS token by itself; these catch turn ends that are not the EOS token, e.g. <|eot_id|> in a
// file whose EOS is <|end_of_text|>).
constexpr const char* kTurnEnds[] = {"<|im_end|>",    "<|eot_id|>",  "<|end|>",
                                     "<end_of_turn>", "<|end_of_turn|>", "<|END_OF_TURN_TOKEN|>",
                                     "<|EOT|>",       "[/TOOL_RESULTS]"};

std::vector<std::string> stops_for(const std::string& name, const std::string& source,
                                   const std::string& eos) {
  if (name == "plain") return {"\nUser:"};
  std::vector<std::string> stop;
  for (const char* marker : kTurnEnds)
    if (marker != std::string("[/TOOL_RESULTS]") && source.find(marker) != std::string::npos)
      stop.emplace_back(marker);
  if (!eos.empty() && source.find("eos_token") != std::string::npos) stop.push_back(eos);
  return stop;
}

// A template file is read as every input file is: a regular file (not /dev/zero, not a FIFO),
// of a bounded size.
constexpr uint64_t kMaxTemplateFileBytes = uint64_t{1} << 20;

}  // namespace

jinja::Value message_values(const std::vector<ChatMessage>& messages) {
  jinja::List list;
  for (const auto& m : messages) {
    jinja::Dict d;
    d.set("role", jinja::Value(m.role));
    d.set("content", m.content_null ? jinja::Value::none() : jinja::Value(m.content));
    if (!m.tool_calls.is_undefined()) d.set("tool_calls", m.tool_calls);
    if (!m.tool_call_id.empty()) d.set("tool_call_id", jinja::Value(m.tool_call_id));
    if (!m.name.empty()) d.set("name", jinja::Value(m.name));
    list.emplace_back(std::move(d));
  }
  return jinja::Value(std::move(list));
}

std::vector<std::string> ChatTemplate::builtin_names() {
  std::vector<std::string> names;
  for (const auto& t : builtin_templates()) names.emplace_back(t.name);
  return names;
}

const std::string* ChatTemplate::builtin_source(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> sources = [] {
    std::vector<std::pair<std::string, std::string>> s;
    for (const auto& t : builtin_templates()) s.emplace_back(t.name, t.source);
    return s;
  }();
  for (const auto& [n, src] : sources)
    if (n == name) return &src;
  return nullptr;
}

ChatTemplate::ChatTemplate(std::string name, std::string source, std::string bos, std::string eos)
    : name_(std::move(name)), source_(std::move(source)), bos_(std::move(bos)), eos_(std::move(eos)) {
  try {
    template_ = std::make_shared<const jinja::Template>(source_);
  } catch (const jinja::Error& e) {
    throw std::runtime_error(fmt::format("chat template '{}' cannot be used: {}", name_, e.what()));
  }
  stop_ = stops_for(name_, source_, eos_);
}

ChatTemplate ChatTemplate::select(const std::string& spec, const std::string& model_template,
                                  std::string bos, std::string eos) {
  std::string name, source;
  if (spec.empty()) {
    name = model_template.empty() ? "plain" : "gguf";
    source = model_template.empty() ? *builtin_source("plain") : model_template;
  } else if (const std::string* builtin = builtin_source(spec)) {
    name = spec;
    source = *builtin;
  } else {
    if (is_regular_file(spec)) source = read_regular_file(spec, kMaxTemplateFileBytes, "chat template");
    if (source.empty()) {
      std::string names;
      for (const auto& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
      throw std::runtime_error(fmt::format(
          "--chat-template '{}' is neither a built-in template ({}) nor a readable, non-empty "
          "file",
          spec, names));
    }
    name = spec;
  }
  ChatTemplate t(std::move(name), std::move(source), std::move(bos), std::move(eos));
  // Trials, under the render budget: a user's message, and a conversation with a system prompt
  // and a reply. A template that refuses one by its own raise_exception is its policy (the
  // request will hear it); any other failure, a budget run out included, means strata cannot
  // run it, said at load (a model's template that never ends left `serve` "loading" for ever).
  const std::vector<std::vector<ChatMessage>> trials = {
      {{"user", "Hello"}},
      {{"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi."}, {"user", "And you?"}}};
  for (const auto& trial : trials) {
    try {
      t.template_->render(t.context(message_values(trial), {}, true));
    } catch (const jinja::RaisedException&) {
    } catch (const jinja::Error& e) {
      throw std::runtime_error(fmt::format(
          "chat template '{}' cannot render a {}: {}{}", t.name_,
          trial.size() == 1 ? "user's message" : "conversation", e.what(),
          t.name_ == "gguf" ? " (--chat-template FILE or a built-in name replaces it)" : ""));
    }
  }
  return t;
}

jinja::Dict ChatTemplate::context(const jinja::Value& messages, const jinja::Dict& extra,
                                  bool add_generation_prompt) const {
  jinja::Dict context;
  context.set("messages", messages);
  context.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  context.set("bos_token", jinja::Value(bos_));
  context.set("eos_token", jinja::Value(eos_));
  for (const auto& [k, v] : extra.items()) context.set(k, v);
  return context;
}

ChatPrompt ChatTemplate::apply(const jinja::Value& messages, const jinja::Dict& extra,
                               bool add_generation_prompt, const jinja::RenderLimits& limits) const {
  ChatPrompt p;
  try {
    p.text = template_->render(context(messages, extra, add_generation_prompt), limits);
  } catch (const jinja::RaisedException& e) {
    throw ChatTemplateRefusal(fmt::format("the chat template refused the messages: {}", e.message()));
  } catch (const jinja::Error& e) {
    throw std::runtime_error(fmt::format("chat template '{}' failed: {}", name_, e.what()));
  }
  p.stop = stop_;
  p.format = name_;
  return p;
}

ChatPrompt ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                               bool add_generation_prompt) const {
  return apply(message_values(messages), {}, add_generation_prompt);
}

}  // namespace strata
