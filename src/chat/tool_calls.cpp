#include "chat/tool_calls.h"

#include <fmt/format.h>

#include <set>

#include "chat/json_schema_grammar.h"

namespace strata {

namespace {

using Json = nlohmann::ordered_json;

const char* arguments_key(ToolCallStyle style) { return style == ToolCallStyle::Llama3 ? "parameters" : "arguments"; }

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::set<std::string> tool_names(const Json& tools) {
  std::set<std::string> names;
  for (const auto& t : tools)
    if (t.contains("function") && t["function"].contains("name")) names.insert(t["function"]["name"].get<std::string>());
  return names;
}

// One call object, if `j` is {"name": a known tool, "arguments"/"parameters": an object}.
bool as_call(const Json& j, ToolCallStyle style, const std::set<std::string>& names, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const std::string name = j["name"].get<std::string>();
  if (!names.count(name)) return false;
  const char* key = j.contains(arguments_key(style)) ? arguments_key(style) : j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key)) return false;
  const Json& args = j[key];
  out.name = name;
  out.arguments = args.is_string() ? args.get<std::string>() : args.dump();
  return true;
}

Json parse_or_null(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  return j.is_discarded() ? Json() : j;
}

}  // namespace

ToolCallStyle tool_call_style(const std::string& source) {
  if (source.find("<tool_call>") != std::string::npos) return ToolCallStyle::Hermes;
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallStyle::Mistral;
  if (source.find("<|start_header_id|>") != std::string::npos && source.find("tools") != std::string::npos)
    return ToolCallStyle::Llama3;
  return ToolCallStyle::Json;
}

const char* tool_call_style_name(ToolCallStyle style) {
  switch (style) {
    case ToolCallStyle::Hermes: return "hermes";
    case ToolCallStyle::Mistral: return "mistral";
    case ToolCallStyle::Llama3: return "llama3";
    case ToolCallStyle::Json: return "json";
  }
  return "json";
}

std::string tool_call_grammar(ToolCallStyle style, const Json& tools, const std::string& only) {
  // The call object as a JSON schema: one alternative per tool.
  Json alternatives = Json::array();
  for (const auto& t : tools) {
    const std::string name = t["function"]["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const Json params = t["function"].contains("parameters") ? t["function"]["parameters"]
                                                             : Json{{"type", "object"}, {"properties", Json::object()}};
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"const", name}}}, {arguments_key(style), params}}},
                            {"required", {"name", arguments_key(style)}}});
  }
  const Json call = alternatives.size() == 1 ? alternatives[0] : Json{{"anyOf", alternatives}};
  std::string gbnf = json_schema_grammar(call);
  gbnf.replace(0, 8, "call ::=");  // its "root ::=" becomes the call, wrapped below
  switch (style) {
    case ToolCallStyle::Hermes: return "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n" + gbnf;
    case ToolCallStyle::Mistral: return "root ::= \"[TOOL_CALLS] [\" call \"]\"\n" + gbnf;
    case ToolCallStyle::Llama3:
    case ToolCallStyle::Json: return "root ::= call\n" + gbnf;
  }
  return gbnf;
}

ParsedReply parse_tool_calls(ToolCallStyle style, const std::string& text, const Json& tools) {
  const std::set<std::string> names = tool_names(tools);
  ParsedReply r;
  if (style == ToolCallStyle::Hermes) {
    std::string rest;
    size_t pos = 0;
    while (true) {
      const size_t open = text.find("<tool_call>", pos);
      if (open == std::string::npos) break;
      const size_t close = text.find("</tool_call>", open);
      if (close == std::string::npos) break;
      ToolCall c;
      if (!as_call(parse_or_null(text.substr(open + 11, close - open - 11)), style, names, c)) break;
      rest += text.substr(pos, open - pos);
      r.calls.push_back(std::move(c));
      pos = close + 12;
    }
    if (r.calls.empty()) return {trim(text), {}};
    r.content = trim(rest + text.substr(pos));
    return r;
  }
  if (style == ToolCallStyle::Mistral) {
    const size_t at = text.find("[TOOL_CALLS]");
    if (at == std::string::npos) return {trim(text), {}};
    const Json list = parse_or_null(text.substr(at + 12));
    if (!list.is_array()) return {trim(text), {}};
    for (const auto& j : list) {
      ToolCall c;
      if (!as_call(j, style, names, c)) return {trim(text), {}};
      r.calls.push_back(std::move(c));
    }
    r.content = trim(text.substr(0, at));
    return r;
  }
  std::string body = trim(text);
  if (body.rfind("<|python_tag|>", 0) == 0) body = trim(body.substr(14));
  ToolCall c;
  if (!as_call(parse_or_null(body), style, names, c)) return {trim(text), {}};
  r.calls.push_back(std::move(c));
  return r;
}

}  // namespace strata
