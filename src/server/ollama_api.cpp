#include "server/ollama_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>

namespace strata {

using nlohmann::json;

namespace {

[[noreturn]] void refuse_ollama(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

bool given(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// Ollama's options with the OpenAI field each is read as; the rest are refused by name.
const std::pair<const char*, const char*> kSamplingOptions[] = {
    {"temperature", "temperature"}, {"top_p", "top_p"},   {"top_k", "top_k"},
    {"min_p", "min_p"},             {"seed", "seed"},     {"stop", "stop"},
    {"repeat_penalty", "repeat_penalty"}, {"presence_penalty", "presence_penalty"},
    {"frequency_penalty", "frequency_penalty"}};

void read_options(const json& options, int64_t max_context, json& out) {
  if (!options.is_object()) refuse_ollama("options", "'options' must be an object");
  for (auto it = options.begin(); it != options.end(); ++it) {
    const std::string& key = it.key();
    if (it.value().is_null()) continue;
    bool mapped = false;
    for (const auto& [ollama, openai] : kSamplingOptions)
      if (key == ollama) out[openai] = it.value(), mapped = true;
    if (mapped) continue;
    if (key == "num_predict") {
      if (!it.value().is_number_integer()) refuse_ollama("options.num_predict", "'options.num_predict' must be an integer");
      const int64_t n = it.value().get<int64_t>();
      out["n_predict"] = n < 0 ? -1 : n;  // -1: until the end; -2 (fill the context) ends there too
    } else if (key == "num_ctx") {
      // The context is the server's (-c): a request may ask for no more than it has.
      if (!it.value().is_number_integer() || it.value().get<int64_t>() > max_context)
        refuse_ollama("options.num_ctx", fmt::format("'options.num_ctx' must be an integer up to the {} positions "
                                           "the server gives a request (strata serve -c)", max_context));
    } else {
      refuse_ollama("options." + key, fmt::format("'options.{}' is not supported (strata takes temperature, top_p, "
                                        "top_k, min_p, seed, stop, num_predict, num_ctx, repeat_penalty, "
                                        "presence_penalty, frequency_penalty)", key));
    }
  }
}

// "format": "json" (any JSON object) or a JSON schema.
void read_format(const json& format, json& out) {
  if (format.is_string() && format.get<std::string>().empty()) return;
  if (format.is_string() && format.get<std::string>() == "json") {
    out["response_format"] = {{"type", "json_object"}};
  } else if (format.is_object()) {
    out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", format}}}};
  } else {
    refuse_ollama("format", "'format' must be \"json\" or a JSON schema");
  }
}

void read_common(const json& body, int64_t max_context, OllamaRequest& r) {
  if (given(body, "model")) {
    if (!body["model"].is_string()) refuse_ollama("model", "'model' must be a string");
    r.openai["model"] = body["model"];
  }
  if (given(body, "stream")) {
    if (!body["stream"].is_boolean()) refuse_ollama("stream", "'stream' must be true or false");
    r.stream = body["stream"].get<bool>();
  }
  r.openai["stream"] = false;  // the reply's shape is Ollama's, written by the caller
  if (given(body, "options")) read_options(body["options"], max_context, r.openai);
  if (given(body, "format")) read_format(body["format"], r.openai);
  if (given(body, "keep_alive")) {
    const json& k = body["keep_alive"];
    const bool zero = (k.is_number() && k.get<double>() == 0) ||
                      (k.is_string() && std::set<std::string>{"0", "0s", "0m", "0h"}.count(k.get<std::string>()));
    if (zero) refuse_ollama("keep_alive", "'keep_alive' 0 asks to unload the model: strata serves one model that stays loaded");
  }
  if (given(body, "think") && !(body["think"].is_boolean() && !body["think"].get<bool>()))
    refuse_ollama("think", "'think' is not supported: strata has no thinking mode for this model");
}

json chat_message(const json& m, size_t i) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) refuse_ollama(where, fmt::format("'{}' must be an object", where));
  if (given(m, "images") && !(m["images"].is_array() && m["images"].empty()))
    refuse_ollama(where + ".images", "images are not supported: the model served reads text only");
  json out = {{"role", m.value("role", json())}, {"content", m.value("content", json(""))}};
  if (given(m, "tool_calls")) {
    if (!m["tool_calls"].is_array()) refuse_ollama(where + ".tool_calls", "'tool_calls' must be an array");
    json calls = json::array();
    for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
      const json& f = m["tool_calls"][k].value("function", json::object());
      const json args = f.value("arguments", json::object());
      calls.push_back({{"id", fmt::format("call_{}_{}", i, k)}, {"type", "function"},
                       {"function", {{"name", f.value("name", json(""))},
                                     {"arguments", args.is_string() ? args.get<std::string>() : args.dump()}}}});
    }
    out["tool_calls"] = std::move(calls);
  }
  if (out["role"] == "tool") {  // Ollama names the tool; OpenAI's template slot wants an id
    out["name"] = m.value("tool_name", m.value("name", json("tool")));
    out["tool_call_id"] = fmt::format("call_{}", i);
  }
  return out;
}

}  // namespace

OllamaRequest translate_ollama_request(const json& body, bool chat_endpoint, int64_t max_context) {
  if (!body.is_object()) refuse_ollama("", "the request body must be a JSON object");
  OllamaRequest r;
  r.chat_reply = chat_endpoint;
  r.openai = json::object();
  read_common(body, max_context, r);
  if (chat_endpoint) {
    if (!given(body, "messages") || !body["messages"].is_array())
      refuse_ollama("messages", "'messages' must be an array of messages");
    json messages = json::array();
    for (size_t i = 0; i < body["messages"].size(); ++i) messages.push_back(chat_message(body["messages"][i], i));
    r.openai["messages"] = std::move(messages);
    if (given(body, "tools")) r.openai["tools"] = body["tools"];
    return r;
  }
  for (const char* key : {"template", "suffix"})
    if (given(body, key) && !(body[key].is_string() && body[key].get<std::string>().empty()))
      refuse_ollama(key, fmt::format("'{}' is not supported: strata renders the model's chat template", key));
  if (given(body, "context") && !(body["context"].is_array() && body["context"].empty()))
    refuse_ollama("context", "'context' is not supported: send the conversation to /api/chat");
  if (given(body, "images") && !(body["images"].is_array() && body["images"].empty()))
    refuse_ollama("images", "images are not supported: the model served reads text only");
  const std::string prompt = given(body, "prompt") && body["prompt"].is_string() ? body["prompt"].get<std::string>() : "";
  if (given(body, "prompt") && !body["prompt"].is_string()) refuse_ollama("prompt", "'prompt' must be a string");
  if (prompt.empty()) {
    r.load_only = true;
    return r;
  }
  const bool raw = given(body, "raw") && body["raw"].is_boolean() && body["raw"].get<bool>();
  if (raw) {
    if (given(body, "system")) refuse_ollama("system", "'system' with 'raw' has no template to go in");
    r.openai["prompt"] = prompt;
    return r;
  }
  json messages = json::array();
  if (given(body, "system")) {
    if (!body["system"].is_string()) refuse_ollama("system", "'system' must be a string");
    messages.push_back({{"role", "system"}, {"content", body["system"]}});
  }
  messages.push_back({{"role", "user"}, {"content", prompt}});
  r.openai["messages"] = std::move(messages);
  return r;
}

json translate_ollama_embed(const json& body, bool legacy) {
  if (!body.is_object()) refuse_ollama("", "the request body must be a JSON object");
  const char* field = legacy ? "prompt" : "input";
  if (!given(body, field)) refuse_ollama(field, fmt::format("'{}' is required", field));
  const json& in = body[field];
  const bool texts = in.is_array() && !in.empty() &&
                     std::all_of(in.begin(), in.end(), [](const json& x) { return x.is_string(); });
  if (!in.is_string() && (legacy || !texts))
    refuse_ollama(field, legacy ? "'prompt' must be a string" : "'input' must be a string or a list of strings");
  if (given(body, "options") && !(body["options"].is_object() && body["options"].empty()))
    refuse_ollama("options", "'options' are not supported for embeddings");
  json out = {{"input", in}};
  if (given(body, "dimensions")) out["dimensions"] = body["dimensions"];
  return out;
}

json ollama_embed_reply(const json& openai_reply, const std::string& model, bool legacy, double seconds) {
  json vectors = json::array();
  for (const json& d : openai_reply.at("data")) vectors.push_back(d.at("embedding"));
  if (legacy) return {{"embedding", vectors.at(0)}};
  return {{"model", model}, {"embeddings", vectors}, {"total_duration", static_cast<int64_t>(seconds * 1e9)},
          {"load_duration", 0}, {"prompt_eval_count", openai_reply.at("usage").at("prompt_tokens")}};
}

std::string ollama_time_now() {
  const auto now = std::chrono::system_clock::now();
  const auto since = now.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since).count() % 1000000000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, nanos);
}

json ollama_tool_calls(const json& openai_calls) {
  json out = json::array();
  for (const json& c : openai_calls) {
    const json& f = c.at("function");
    json args = json::object();
    try {
      args = json::parse(f.at("arguments").get<std::string>());
    } catch (const json::exception&) {
      args = f.at("arguments");  // as written, when it is not JSON
    }
    out.push_back({{"function", {{"name", f.at("name")}, {"arguments", args}}}});
  }
  return out;
}

json ollama_chunk(const OllamaStamp& stamp, bool chat_reply, const std::string& text) {
  json j = {{"model", stamp.model}, {"created_at", stamp.created_at}};
  if (chat_reply) j["message"] = {{"role", "assistant"}, {"content", text}};
  else j["response"] = text;
  j["done"] = false;
  return j;
}

json ollama_reply(const CompletionRequest& req, const CompletionIds& ids, const OllamaStamp& stamp,
                  bool chat_reply, const GenerationResult& r) {
  json j = ollama_chunk(stamp, chat_reply, r.text);
  if (chat_reply && req.tools_active()) {
    const ToolReply t = tool_reply(req, ids, r.text, 0);
    j["message"]["content"] = t.message["content"].is_null() ? json("") : t.message["content"];
    if (t.called) j["message"]["tool_calls"] = ollama_tool_calls(t.message["tool_calls"]);
  }
  const auto ns = [](double s) { return static_cast<int64_t>(s * 1e9); };
  j["done"] = true;
  j["done_reason"] = r.finish_reason;
  j["total_duration"] = ns(r.queued_s + r.prompt_s + r.decode_s);
  j["load_duration"] = 0;  // the model was loaded when the server started
  j["prompt_eval_count"] = r.prompt_tokens - r.cached_tokens;
  j["prompt_eval_duration"] = ns(r.prompt_s);
  j["eval_count"] = r.completion_tokens;
  j["eval_duration"] = ns(r.decode_s);
  return j;
}

json ollama_loaded(const OllamaStamp& stamp) {
  return {{"model", stamp.model}, {"created_at", stamp.created_at}, {"response", ""}, {"done", true},
          {"done_reason", "load"}};
}

std::string ollama_parameter_size(uint64_t p) {
  if (p >= 1'000'000'000) return fmt::format("{:.1f}B", p / 1e9);
  if (p >= 1'000'000) return fmt::format("{:.0f}M", p / 1e6);
  return fmt::format("{:.0f}K", p / 1e3);
}

namespace {

json model_details(const OllamaModel& m) {
  return {{"parent_model", ""}, {"format", "gguf"}, {"family", m.architecture},
          {"families", json::array({m.architecture})}, {"parameter_size", ollama_parameter_size(m.parameters)},
          {"quantization_level", m.quantization}};
}

json model_entry(const OllamaModel& m) {
  return {{"name", m.name}, {"model", m.name}, {"size", m.file_bytes}, {"digest", m.digest}, {"details", model_details(m)}};
}

}  // namespace

json ollama_tags(const OllamaModel& m) {
  json entry = model_entry(m);
  entry["modified_at"] = m.modified_at;
  return {{"models", json::array({entry})}};
}

json ollama_ps(const OllamaModel& m) {
  json entry = model_entry(m);
  entry["expires_at"] = "9999-12-31T23:59:59Z";  // loaded for the life of the server
  entry["size_vram"] = 0;
  entry["context_length"] = m.context_length;
  return {{"models", json::array({entry})}};
}

json ollama_show(const OllamaModel& m) {
  json caps = json::array({"completion"});
  if (m.tools) caps.push_back("tools");
  const std::string a = m.architecture;
  return {{"modelfile", fmt::format("# served by strata\nFROM {}\n", m.name)},
          {"parameters", ""},
          {"template", m.chat_template},
          {"details", model_details(m)},
          {"model_info", {{"general.architecture", a}, {"general.parameter_count", m.parameters},
                          {a + ".context_length", m.context_length}, {a + ".embedding_length", m.embedding_length}}},
          {"capabilities", caps},
          {"modified_at", m.modified_at}};
}

}  // namespace strata
