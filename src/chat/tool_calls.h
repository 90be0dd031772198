// Function calling: how a model writes a tool call (the style its chat template teaches), the
// grammar that makes it write one when a request requires it, and reading calls back out of
// generated text. Pure functions; the server wires them to requests.
//
// Styles, recognised from the template's source:
//   hermes:  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>   (Qwen2.5/3, Hermes)
//   mistral: [TOOL_CALLS] [{"name": N, "arguments": {...}}]                (Mistral v3+)
//   llama3:  {"name": N, "parameters": {...}}                              (Llama 3.1-3.3)
//   json:    {"name": N, "arguments": {...}}                               (any other template)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata {

enum class ToolCallStyle { Hermes, Mistral, Llama3, Json };

ToolCallStyle tool_call_style(const std::string& template_source);
const char* tool_call_style_name(ToolCallStyle style);

// GBNF for one call, in the style, of one of `tools` (OpenAI's [{"type": "function", "function":
// {"name", "parameters"}}]), or only of the one named `only` (non-empty); its arguments follow
// the tool's parameters schema. SchemaError (chat/json_schema_grammar.h) for a parameters schema
// with a keyword strata cannot enforce.
std::string tool_call_grammar(ToolCallStyle style, const nlohmann::ordered_json& tools,
                              const std::string& only = "");

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text (OpenAI sends and expects a string)
};

struct ParsedReply {
  std::string content;          // the text outside the calls (trimmed)
  std::vector<ToolCall> calls;  // empty: a plain answer
};

// The calls in a generated text, if it holds calls of known tools written in the style;
// otherwise the whole text as content and no calls.
ParsedReply parse_tool_calls(ToolCallStyle style, const std::string& text,
                             const nlohmann::ordered_json& tools);

}  // namespace strata
