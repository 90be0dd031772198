#include "server/openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "chat/json_schema_grammar.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "generation/grammar.h"
#include "generation/seed_choice.h"

namespace strata {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

double number(const json& body, const char* key, double lo, double hi) {
  const json& v = body[key];
  if (!v.is_number()) bad(key, fmt::format("'{}' must be a number", key));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, x));
  return x;
}

int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json& v = body[key];
  if (!v.is_number_integer()) bad(key, fmt::format("'{}' must be an integer", key));
  const int64_t x =
      v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi) bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, x));
  return x;
}

// OpenAI's {"token id": bias} (-100..100) or llama.cpp's [[id, bias]] with false for a ban
// (-inf). The ids' range is the server's to check against the vocabulary.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& b) {
  std::vector<std::pair<int32_t, float>> out;
  auto id_of = [](const std::string& key) {
    // Decimal digits only: stoll took " 5" and "+5" as 5.
    int64_t id = 0;
    const bool digits =
        !key.empty() && key.size() <= 10 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits || id > INT32_MAX)
      bad("logit_bias", fmt::format("logit_bias key '{}' is not a token id", key.substr(0, 32)));
    return static_cast<int32_t>(id);
  };
  auto bias_of = [](const json& v) {
    if (v.is_boolean() && !v.get<bool>()) return -INFINITY;
    if (!v.is_number() || !(v.get<double>() >= -100 && v.get<double>() <= 100))
      bad("logit_bias", "a logit_bias value must be a number in [-100, 100] (or false: banned)");
    return static_cast<float>(v.get<double>());
  };
  if (b.is_object()) {
    if (b.size() > 1024) bad("logit_bias", "at most 1024 logit_bias entries");
    for (const auto& [key, v] : b.items()) out.emplace_back(id_of(key), bias_of(v));
  } else if (b.is_array()) {
    if (b.size() > 1024) bad("logit_bias", "at most 1024 logit_bias entries");
    for (const json& e : b) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer())
        bad("logit_bias", "a logit_bias array holds [token id, bias] pairs");
      const int64_t id = e[0].get<int64_t>();
      if (id < 0 || id > INT32_MAX) bad("logit_bias", "a logit_bias token id must be an id");
      out.emplace_back(static_cast<int32_t>(id), bias_of(e[1]));
    }
  } else {
    bad("logit_bias", "'logit_bias' must be an object of token id: bias");
  }
  // One bias per token, the last given (as a JSON object's repeated key, and llama-server's
  // array): two added up past the [-100, 100] each is held to.
  std::vector<std::pair<int32_t, float>> once;
  std::set<int32_t> seen;
  for (auto it = out.rbegin(); it != out.rend(); ++it)
    if (seen.insert(it->first).second) once.push_back(*it);
  std::reverse(once.begin(), once.end());
  return once;
}

bool present(const json& body, const char* key);

// The body read again keeping its keys' order, for schemas and tools. nlohmann's ordered_json
// finds a key by a linear search, so an object of n keys parses in O(n^2) (a $ref chain of
// 20,000 definitions took 0.4 s, 200,000 would take minutes): bounded by the body's values.
constexpr uint64_t kMaxOrderedValues = 20000;
nlohmann::ordered_json parse_ordered(const std::string& text, const std::string& param) {
  const uint64_t values = measure_json(text).values;
  if (values > kMaxOrderedValues)
    bad(param, fmt::format("a request with '{}' has at most {} JSON values, not {}", param,
                           kMaxOrderedValues, values));
  return nlohmann::ordered_json::parse(text);
}

// Chat: "logprobs": true and "top_logprobs": 0..20; completions: "logprobs": 0..20 (the
// legacy API's alternatives count). Off by default; null and false are off.
void read_logprobs(const json& body, bool chat, GenerationParams& g) {
  const bool off = !present(body, "logprobs") ||
                   (body["logprobs"].is_boolean() && !body["logprobs"].get<bool>());
  if (chat) {
    if (!off && !body["logprobs"].is_boolean())
      bad("logprobs", "'logprobs' must be true or false (chat; the alternatives: top_logprobs)");
    if (!off) g.logprobs = 0;
    if (present(body, "top_logprobs")) {
      const auto n = static_cast<int>(integer(body, "top_logprobs", 0, 20));
      if (off) bad("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
      g.logprobs = n;
    }
    return;
  }
  if (present(body, "top_logprobs"))
    bad("top_logprobs", "completions take the alternatives' count as 'logprobs': N");
  if (!off) g.logprobs = static_cast<int>(integer(body, "logprobs", 0, 20));
}

bool present(const json& body, const char* key) {
  return body.contains(key) && !body[key].is_null();
}

std::vector<int32_t> token_ids(const json& a, const char* key) {
  std::vector<int32_t> ids;
  for (const json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      bad(key, fmt::format("'{}' token ids must be non-negative integers", key));
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

void parse_prompt(const json& body, CompletionRequest& r) {
  if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
    return;
  }
  if (p.is_array() && !p.empty()) {
    if (p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
      return;
    }
    if (p[0].is_number()) {
      r.prompt_ids = token_ids(p, "prompt");
      return;
    }
    if (p.size() == 1 && p[0].is_array()) {
      r.prompt_ids = token_ids(p[0], "prompt");
      if (r.prompt_ids.empty()) bad("prompt", "the prompt is empty");
      return;
    }
    if (p.size() > 1 && (p[0].is_string() || p[0].is_array()))
      bad("prompt", "one prompt per request: strata serves one completion at a time");
  }
  bad("prompt", "'prompt' must be a string, an array of token ids, or an array of one of those");
}

// An assistant message's tool_calls as the chat template sees them: each call's arguments, which
// OpenAI sends as a JSON string, parsed into an object where they parse (templates write them with
// tojson), as llama.cpp does.
jinja::Value tool_calls_value(const json& calls, const std::string& where) {
  if (!calls.is_array()) bad(where, fmt::format("'{}' must be an array", where));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const std::string at = fmt::format("{}[{}]", where, k);
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      bad(at, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\": ..., "
                          "\"arguments\": ...}}}}",
                          at));
    nlohmann::ordered_json fn = {{"name", c["function"]["name"]}};
    const json args =
        c["function"].contains("arguments") ? c["function"]["arguments"] : json::object();
    if (args.is_string()) {
      // A string parsed again: bounded as the body is (30,000 '[' overflowed the stack).
      const std::string& text = args.get_ref<const std::string&>();
      try {
        check_json_depth(measure_json(text), "'" + at + ".function.arguments'");
      } catch (const Error& e) {
        bad(at + ".function.arguments", e.what());
      }
      auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
      fn["arguments"] =
          parsed.is_discarded() ? nlohmann::ordered_json(args.get<std::string>()) : parsed;
    } else {
      fn["arguments"] = nlohmann::ordered_json::parse(args.dump());
    }
    nlohmann::ordered_json call = {{"type", "function"}, {"function", fn}};
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    out.push_back(std::move(call));
  }
  return jinja::from_json(out);
}

void parse_messages(const json& body, CompletionRequest& r) {
  if (!body.contains("messages")) bad("messages", "'messages' is required");
  const json& ms = body["messages"];
  if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(where, fmt::format("'{}' must be an object", where));
    if (!m.contains("role") || !m["role"].is_string())
      bad(where + ".role", fmt::format("'{}.role' must be a string", where));
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad(where + ".role",
          fmt::format("'{}.role' is '{}'; strata takes system, user, assistant or tool", where,
                      role));
    std::string content;
    const json c = m.contains("content") ? m["content"] : json();
    if (c.is_string()) {
      content = c.get<std::string>();
    } else if (c.is_array()) {  // content parts: text only
      for (const json& part : c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
            !part.contains("text") || !part["text"].is_string())
          bad(where + ".content", fmt::format("'{}.content' parts must be text parts "
                                              "({{\"type\": \"text\", \"text\": ...}})",
                                              where));
        content += part["text"].get<std::string>();
      }
    } else if (!(c.is_null() && role == "assistant")) {
      bad(where + ".content", fmt::format("'{}.content' must be a string", where));
    }
    ChatMessage message{role, content};
    message.content_null = c.is_null();
    if (role == "assistant" && present(m, "tool_calls"))
      message.tool_calls = tool_calls_value(m["tool_calls"], where + ".tool_calls");
    // OpenAI's rule: an assistant's content may be missing or null only beside its tool calls
    // (a template would otherwise meet a None where it expects text: fuzz_openai found it).
    if (message.content_null && (!present(m, "tool_calls") || m["tool_calls"].empty()))
      bad(where + ".content",
          fmt::format("'{}.content' may be null only in an assistant message with tool_calls",
                      where));
    if (role == "tool") {
      for (const char* key : {"tool_call_id", "name"}) {
        if (!present(m, key)) continue;
        if (!m[key].is_string())
          bad(where + "." + key, fmt::format("'{}.{}' must be a string", where, key));
        (key == std::string("name") ? message.name : message.tool_call_id) =
            m[key].get<std::string>();
      }
    }
    r.messages.push_back(std::move(message));
  }
}

}  // namespace

json error_body(int status, const std::string& message, const std::string& param,
                const std::string& code) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

// The grammar one of response_format (json_object, json_schema), llama.cpp's json_schema or
// its grammar (GBNF) asks for, compiled; none for plain text. A schema keyword strata cannot
// enforce, or a grammar that does not compile, is a 400 naming it. Returns the field that gave
// the grammar ("" for none).
std::string read_output_format(const std::string& text, const json& body, GenerationParams& g) {
  const char* given = nullptr;
  for (const char* key : {"response_format", "json_schema", "grammar"}) {
    if (!present(body, key)) continue;
    if (key == std::string("response_format") && body[key].is_object() &&
        body[key].value("type", json()) == "text")
      continue;  // plain text: what strata gives anyway
    if (given) bad(key, fmt::format("give one of '{}' and '{}', not both", given, key));
    given = key;
  }
  if (!given) return "";
  const std::string key = given;
  std::string gbnf;
  // Schemas are read again keeping their keys' order: properties are written in that order.
  auto schema_at = [&](auto&& path) {
    const auto ordered = parse_ordered(text, key);
    const nlohmann::ordered_json* s = &ordered;
    for (const char* k : path) s = &(*s)[k];
    return *s;
  };
  try {
    if (key == "grammar") {
      if (!body[key].is_string()) bad(key, "'grammar' must be a string (GBNF)");
      gbnf = body[key].get<std::string>();
    } else if (key == "json_schema") {
      if (!body[key].is_object()) bad(key, "'json_schema' must be a JSON schema (an object)");
      gbnf = json_schema_grammar(schema_at(std::vector<const char*>{"json_schema"}));
    } else {
      const json& f = body[key];
      const std::string type = f.is_object() && f.contains("type") && f["type"].is_string()
                                   ? f["type"].get<std::string>()
                                   : "";
      if (type == "json_object") {
        gbnf = f.contains("schema") ? json_schema_grammar(schema_at(
                                          std::vector<const char*>{"response_format", "schema"}))
                                    : json_object_grammar();
      } else if (type == "json_schema") {
        if (!f.contains("json_schema") || !f["json_schema"].is_object() ||
            !f["json_schema"].contains("schema") || !f["json_schema"]["schema"].is_object())
          bad("response_format",
              "'response_format' of type json_schema needs {\"json_schema\": {\"schema\": {...}}}");
        gbnf = json_schema_grammar(
            schema_at(std::vector<const char*>{"response_format", "json_schema", "schema"}));
      } else {
        bad("response_format",
            "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
            "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": ...}}");
      }
    }
    g.grammar = std::make_shared<const Grammar>(Grammar::parse(gbnf));
  } catch (const SchemaError& e) {
    bad(key, fmt::format("{} (keyword '{}')", e.what(), e.keyword()));
  } catch (const Error& e) {
    bad(key, e.what());
  }
  return key;
}

// tools, tool_choice and parallel_tool_calls (chat only). Tools are read again keeping their
// keys' order: templates print them with tojson.
void read_tools(const std::string& text, const json& body, CompletionRequest& r) {
  const bool has_tools =
      present(body, "tools") && !(body["tools"].is_array() && body["tools"].empty());
  if (has_tools) {
    if (!r.chat) bad("tools", "'tools' is for /v1/chat/completions");
    const auto ordered = parse_ordered(text, "tools");
    const auto& tools = ordered["tools"];
    if (!tools.is_array()) bad("tools", "'tools' must be an array");
    std::set<std::string> names;
    for (size_t i = 0; i < tools.size(); ++i) {
      const auto& t = tools[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || t.value("type", nlohmann::ordered_json()) != "function" ||
          !t.contains("function") || !t["function"].is_object())
        bad(at, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", at));
      const auto& fn = t["function"];
      const std::string name =
          fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
      const bool valid =
          !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
          });
      if (!valid)
        bad(at + ".function.name",
            fmt::format("'{}.function.name' must be 1 to 64 letters, digits, _ or -", at));
      if (!names.insert(name).second)
        bad(at + ".function.name", fmt::format("two tools are named '{}'", name));
      if (fn.contains("parameters") && !fn["parameters"].is_object())
        bad(at + ".function.parameters",
            fmt::format("'{}.function.parameters' must be a JSON schema (an object)", at));
    }
    r.tools = tools;
    r.tool_choice = "auto";
  }
  if (present(body, "tool_choice")) {
    const json& c = body["tool_choice"];
    if (c.is_string() && (c == "none" || c == "auto" || c == "required")) {
      r.tool_choice = c.get<std::string>();
    } else if (c.is_object() && c.value("type", json()) == "function" && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") &&
               c["function"]["name"].is_string()) {
      r.tool_choice = "function";
      r.tool_function = c["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice",
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}");
    }
    if (r.tool_choice != "none" && !has_tools)
      bad("tool_choice", fmt::format("'tool_choice' {} needs 'tools'", c.dump()));
    if (r.tool_choice == "function") {
      bool known = false;
      for (const auto& t : r.tools) known = known || t["function"]["name"] == r.tool_function;
      if (!known)
        bad("tool_choice",
            fmt::format("'tool_choice' names '{}', which is not among the tools", r.tool_function));
    }
  }
  if (present(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      bad("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    r.parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  if (r.tools_active() && r.stream && r.generation.logprobs >= 0)
    bad("logprobs",
        "'logprobs' with tools is not supported when streaming (a reply with tools is sent whole "
        "at its end)");
  if ((r.tool_choice == "required" || r.tool_choice == "function") && r.generation.grammar)
    bad("tool_choice",
        "a required tool call and a response format cannot both constrain the reply");
}

namespace {

// llama-server's reasoning_format (none, auto, deepseek), the server's where the request has none.
ReasoningFormat read_reasoning_format(const json& body, ReasoningFormat server_default) {
  if (!present(body, "reasoning_format")) return server_default;
  const auto format = body["reasoning_format"].is_string()
                          ? reasoning_format_from_name(body["reasoning_format"].get<std::string>())
                          : std::nullopt;
  if (!format) bad("reasoning_format", "'reasoning_format' must be one of none, auto, deepseek");
  return *format;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& text, bool chat,
                                           const ServerDefaults& defaults) {
  json body;
  try {
    body = parse_json_bounded(text, "the request body");
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    bad("", fmt::format("the request body is not valid JSON ({})", e.what()));
  } catch (const Error& e) {  // nested too deep
    bad("", e.what());
  }
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (chat)
    parse_messages(body, r);
  else
    parse_prompt(body, r);
  if (present(body, "model") && !body["model"].is_string())
    bad("model", "'model' must be a string");

  GenerationParams& g = r.generation;
  g.max_tokens = defaults.max_tokens;
  g.sampling = defaults.sampling;
  // OpenAI's limits start at 1 (a request for no tokens is a mistake to name); llama.cpp's
  // n_predict keeps its meanings: -1 until the end, 0 the prompt alone and no token.
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (present(body, key)) g.max_tokens = integer(body, key, 1, int64_t{1} << 30);
  if (present(body, "n_predict")) g.max_tokens = integer(body, "n_predict", -1, int64_t{1} << 30);
  if (present(body, "temperature"))
    g.sampling.temperature = static_cast<float>(number(body, "temperature", 0, 100));
  if (present(body, "top_p")) g.sampling.top_p = static_cast<float>(number(body, "top_p", 0, 1));
  if (present(body, "top_k"))
    g.sampling.top_k = static_cast<int32_t>(integer(body, "top_k", 0, INT32_MAX));
  if (present(body, "min_p")) g.sampling.min_p = static_cast<float>(number(body, "min_p", 0, 1));
  if (present(body, "repeat_penalty"))
    g.sampling.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0, 100));
  std::optional<int64_t> seed;
  if (present(body, "seed")) seed = integer(body, "seed", INT64_MIN, INT64_MAX);
  g.sampling.seed = choose_seed(seed, defaults.seed, fresh_seed());
  if (present(body, "stop")) {
    const json& s = body["stop"];
    if (s.is_string()) {
      g.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 16) {
      for (const json& x : s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of at most 16 strings");
    }
  }
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) bad("stream", "'stream' must be true or false");
    r.stream = body["stream"].get<bool>();
  }
  if (present(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (present(so, "include_usage")) {
      if (!so["include_usage"].is_boolean())
        bad("stream_options.include_usage", "'stream_options.include_usage' must be true or false");
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  // What strata does not do: refuse clearly rather than ignore.
  if (present(body, "n")) r.n = static_cast<int>(integer(body, "n", 1, kMaxChoices));
  if (present(body, "best_of") && integer(body, "best_of", 1, 1) != 1)
    bad("best_of", "'best_of' must be 1");
  if (present(body, "presence_penalty"))
    g.sampling.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2));
  if (present(body, "frequency_penalty"))
    g.sampling.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2));
  if (present(body, "echo") && (!body["echo"].is_boolean() || body["echo"].get<bool>()))
    bad("echo", "'echo' is not supported");
  read_logprobs(body, chat, g);
  for (const char* key : {"suffix", "functions"})
    if (present(body, key) && !(body[key].is_boolean() && !body[key].get<bool>()))
      bad(key, fmt::format("'{}' is not supported", key));
  if (present(body, "logit_bias")) g.sampling.logit_bias = parse_logit_bias(body["logit_bias"]);
  // llama-server's per-request speculative settings (where the server drafts).
  if (present(body, "speculative.n_max"))
    g.draft_max = static_cast<int>(integer(body, "speculative.n_max", 0, 256));
  if (present(body, "speculative.n_min"))
    g.draft_min = static_cast<int>(integer(body, "speculative.n_min", 0, 256));
  if (present(body, "speculative.p_min"))
    g.draft_p_min = static_cast<float>(number(body, "speculative.p_min", 0, 1));
  r.grammar_param = read_output_format(text, body, g);
  read_tools(text, body, r);
  if (present(body, "function_call")) bad("function_call", "'function_call' is not supported");
  r.reasoning_format = read_reasoning_format(body, defaults.reasoning_format);
  return r;
}

}  // namespace strata
