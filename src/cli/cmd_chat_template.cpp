// strata chat-template: the prompt a chat template makes of a conversation, as `serve` builds it
// (llama-server's --chat-template, --verbose-prompt). Lists and shows the built-in templates.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "format/gguf.h"
#include "model/tokenizer.h"

namespace strata {

namespace {

struct ChatTemplateOptions {
  std::string model, chat_template, context, bos, eos;
  bool list = false, show = false, no_generation_prompt = false, json = false;
};

// The conversations to render: --context's object or array of objects, else a sample.
nlohmann::ordered_json contexts(const ChatTemplateOptions& o) {
  if (o.context.empty()) {
    return nlohmann::ordered_json::array(
        {{{"messages",
           {{{"role", "system"}, {"content", "You are a helpful assistant."}},
            {{"role", "user"}, {"content", "Hello"}},
            {{"role", "assistant"}, {"content", "Hi there"}},
            {{"role", "user"}, {"content", "Who are you?"}}}}}});
  }
  const std::string text = read_regular_file(o.context, kMaxJsonFileBytes, "JSON");
  check_json_depth(measure_json(text), fmt::format("'{}'", o.context));
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", o.context, e.what());
  }
  if (j.is_object()) j = nlohmann::ordered_json::array({j});
  if (!j.is_array()) fail("'{}' must hold a context object or an array of them", o.context);
  for (const auto& c : j)
    if (!c.is_object() || !c.contains("messages") || !c["messages"].is_array())
      fail("'{}': every context must be an object with a \"messages\" array", o.context);
  return j;
}

int run_chat_template(const ChatTemplateOptions& o) {
  if (o.list) {
    for (const auto& name : ChatTemplate::builtin_names()) fmt::print("{}\n", name);
    return 0;
  }
  std::string model_template, bos = o.bos, eos = o.eos;
  if (!o.model.empty()) {
    const auto f = GgufFile::open(o.model);
    model_template = f->get_string("tokenizer.chat_template", "");
    const auto tok = Tokenizer::from_gguf(*f);
    auto text_of = [&](int32_t id) { return id >= 0 ? tok->token_text(id) : std::string(); };
    if (bos.empty()) bos = text_of(tok->bos());
    if (eos.empty()) eos = text_of(tok->eos());
  } else if (o.chat_template.empty()) {
    fail("give a model (-m) or a template (--chat-template NAME|FILE)");
  }
  std::optional<ChatTemplate> tmpl;
  try {
    tmpl = ChatTemplate::select(o.chat_template, model_template, bos, eos);
  } catch (const std::runtime_error& e) {
    fail("{}", e.what());
  }
  if (o.show) {
    fmt::print("{}", tmpl->source());
    return 0;
  }
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& c : contexts(o)) {
    jinja::Dict extra;
    for (auto it = c.begin(); it != c.end(); ++it)
      if (it.key() != "messages") extra.set(it.key(), jinja::from_json(it.value()));
    nlohmann::ordered_json r;
    try {
      const ChatPrompt p = tmpl->apply(jinja::from_json(c["messages"]), extra, !o.no_generation_prompt);
      r = {{"prompt", p.text}, {"stop", p.stop}};
    } catch (const ChatTemplateRefusal& e) {
      r = {{"error", e.what()}, {"raised", true}};
    } catch (const std::runtime_error& e) {
      r = {{"error", e.what()}, {"raised", false}};
    }
    if (!o.json) {
      if (r.contains("error")) fail("{}", r["error"].get<std::string>());
      fmt::print("{}", r["prompt"].get<std::string>());
    }
    results.push_back(std::move(r));
  }
  if (o.json) fmt::print("{}\n", results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return 0;
}

}  // namespace

Command add_chat_template_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat-template", "Print the prompt a chat template makes of a conversation (as serve does)");
  auto o = std::make_shared<ChatTemplateOptions>();
  cmd->add_option("-m,--model", o->model, "GGUF file: its tokenizer.chat_template, BOS and EOS");
  cmd->add_option("--chat-template", o->chat_template,
                  "A built-in template's name (--list) or a Jinja file, instead of the model's");
  cmd->add_option("--context", o->context,
                  "JSON file: {\"messages\": [...], other template variables} or an array of "
                  "them (default: a sample conversation)");
  cmd->add_option("--bos", o->bos, "BOS text (default: the model's)");
  cmd->add_option("--eos", o->eos, "EOS text (default: the model's)");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Render without add_generation_prompt");
  cmd->add_flag("--list", o->list, "List the built-in templates");
  cmd->add_flag("--show", o->show, "Print the template's source");
  cmd->add_flag("--json", o->json,
                "Print a JSON array: per context {prompt, stop} or {error, raised}");
  return {cmd, [o] { return run_chat_template(*o); }};
}

}  // namespace strata
