// Reliability round 3 (issue 52): grammars and JSON schemas from a hostile client. Each case was
// a crash (stack overflow), a stall or gigabytes before its fix; each is now a one-line error
// naming the limit, found when the grammar compiles (before a request reaches the scheduler).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "chat/json_schema_grammar.h"
#include "chat/tool_calls.h"
#include "generation/grammar.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;

std::string parse_error(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool takes(const Grammar& g, const std::string& text) {
  GrammarState s(g);
  for (unsigned char c : text)
    if (!s.advance(c)) return false;
  return s.accepting();
}

// Issue 52.3: 30,000 nested '(' overflowed the parser's stack.
TEST(HostileGrammar, DeeplyNestedGroupsAreRefused) {
  const std::string deep = "root ::= " + std::string(30000, '(') + "\"a\"" + std::string(30000, ')');
  EXPECT_NE(parse_error(deep).find("groups nest deeper than 128"), std::string::npos) << parse_error(deep);
  const std::string ok = "root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')');
  EXPECT_TRUE(takes(Grammar::parse(ok), "a"));
}

// Issue 52.2/52.3: a chain of 60,000 rules overflowed the left-recursion check; a chain over
// 10,000 made matching throw inside the scheduler (the process aborted).
TEST(HostileGrammar, LongRuleChainsParseMatchOrAreRefusedWithoutRecursion) {
  std::string chain = "root ::= r0\n";
  const int n = 60000;
  for (int i = 0; i + 1 < n; ++i) chain += fmt::format("r{} ::= r{}\n", i, i + 1);
  const Grammar g = Grammar::parse(chain + fmt::format("r{} ::= \"a\"\n", n - 1));
  EXPECT_TRUE(takes(g, "a"));
  EXPECT_FALSE(takes(g, "b"));
  // The same chain closed into a loop: left recursion, named.
  EXPECT_EQ(parse_error(chain + fmt::format("r{} ::= r0 \"a\"\n", n - 1)),
            "the grammar is left-recursive at rule 'r0'");
  // Links that are empty because the last one is (found in one pass, not n passes).
  std::string nullable = "root ::= n0 \"x\"\n";
  for (int i = 0; i + 1 < n; ++i) nullable += fmt::format("n{} ::= n{}\n", i, i + 1);
  EXPECT_TRUE(takes(Grammar::parse(nullable + fmt::format("n{} ::= \n", n - 1)), "x"));
  // Each link may also be a "b": 60,000 paths at once, refused by name.
  std::string ambiguous = "root ::= n0 \"x\"\n";
  for (int i = 0; i + 1 < n; ++i) ambiguous += fmt::format("n{} ::= n{} | \"b\"\n", i, i + 1);
  EXPECT_NE(parse_error(ambiguous + fmt::format("n{} ::= \n", n - 1)).find("more than 4096 paths"),
            std::string::npos);
}

// Issue 52.9: a 30 KB literal repeated {1000} took the server to 1.86 GB.
TEST(HostileGrammar, RepetitionThatSpellsOutTooMuchIsRefusedBeforeItIsBuilt) {
  const std::string big = "root ::= \"" + std::string(30000, 'a') + "\"{1000}";
  try {
    Grammar::parse(big);
    ADD_FAILURE() << "parsed";
  } catch (const GrammarLimit& e) {
    EXPECT_NE(std::string(e.what()).find("more than 131072 elements"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(takes(Grammar::parse("root ::= \"ab\"{1000}"), [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "ab";
    return s;
  }()));
}

// Issue 52.8: 436 bytes made 2^20 parse stacks under the scheduler's lock (~100 s, +500 MiB).
TEST(HostileGrammar, AlternativesThatMultiplyAreRefusedAtCompileTime) {
  std::string g = "root ::= a0\n";
  for (int i = 0; i < 20; ++i)
    g += fmt::format("a{} ::= a{} | a{}\n", i, i + 1, i + 1);
  g += "a20 ::= \"x\"\n";
  EXPECT_LT(g.size(), 500u);
  EXPECT_NE(parse_error(g).find("more than 4096 paths"), std::string::npos) << parse_error(g);
  // The same after a first character: compiles, and the request's own match fails loudly.
  const std::string later = "root ::= \"s\" a0\n" + g.substr(g.find('\n') + 1);
  const Grammar late = Grammar::parse(later);
  GrammarState s(late);
  EXPECT_THROW(s.advance('s'), GrammarLimit);
}

// Issue 52.13: an enum of 4,100 values answered 200 with empty content (the reply ended in
// silence past 4,096 paths). Now refused when the schema compiles.
TEST(HostileGrammar, AnEnumPastThePathLimitIsRefusedNotCutShort) {
  Json values = Json::array();
  for (int i = 0; i < 4100; ++i) values.push_back(fmt::format("v{}", i));
  const std::string gbnf = json_schema_grammar(Json{{"enum", values}});
  EXPECT_NE(parse_error(gbnf).find("more than 4096 paths"), std::string::npos);
  values.erase(values.begin() + 4000, values.end());
  const Grammar ok = Grammar::parse(json_schema_grammar(Json{{"enum", values}}));
  EXPECT_TRUE(takes(ok, "\"v3999\""));
}

std::string schema_error(const Json& schema) {
  try {
    json_schema_grammar(schema);
  } catch (const SchemaError& e) {
    return e.keyword() + ": " + e.what();
  }
  return "";
}

// Issue 52.3: a $ref chain of 20,000 (740 KB) overflowed the converter's stack.
TEST(HostileGrammar, SchemaRefChainsAreBounded) {
  Json defs = Json::object();
  const int n = 20000;
  for (int i = 0; i + 1 < n; ++i) defs[fmt::format("d{}", i)] = {{"$ref", fmt::format("#/$defs/d{}", i + 1)}};
  defs[fmt::format("d{}", n - 1)] = {{"type", "integer"}};
  const Json schema = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  EXPECT_NE(schema_error(schema).find("$ref: the JSON schema's '$ref' chain nests schemas deeper than 128"),
            std::string::npos)
      << schema_error(schema);
  // A short chain, and a recursive schema, still compile.
  const Json short_chain = {{"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"type", "integer"}}}}},
                            {"$ref", "#/$defs/a"}};
  EXPECT_TRUE(takes(Grammar::parse(json_schema_grammar(short_chain)), "42"));
  const Json tree = {{"$defs", {{"node", {{"type", "object"},
                                          {"properties", {{"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                                          {"required", {"kids"}},
                                          {"additionalProperties", false}}}}},
                     {"$ref", "#/$defs/node"}};
  EXPECT_TRUE(takes(Grammar::parse(json_schema_grammar(tree)), R"({"kids":[{"kids":[]}]})"));
}

// Issue 52.12: a tool whose parameters use $defs/$ref (every Pydantic model with a nested model)
// was refused under tool_choice "required": the reference was resolved against the call schema
// built around the parameters.
TEST(HostileGrammar, ToolParametersResolveTheirOwnDefs) {
  const Json params = {
      {"$defs", {{"Address", {{"type", "object"},
                              {"properties", {{"city", {{"type", "string"}}}}},
                              {"required", {"city"}},
                              {"additionalProperties", false}}}}},
      {"type", "object"},
      {"properties", {{"home", {{"$ref", "#/$defs/Address"}}}}},
      {"required", {"home"}},
      {"additionalProperties", false}};
  const Json tools = Json::array({{{"type", "function"}, {"function", {{"name", "move"}, {"parameters", params}}}}});
  const Grammar g = Grammar::parse(tool_call_grammar(ToolCallStyle::Json, tools, ""));
  EXPECT_TRUE(takes(g, R"({"name": "move", "arguments": {"home": {"city": "Oslo"}}})"));
  EXPECT_FALSE(takes(g, R"({"name": "move", "arguments": {"home": {"town": "Oslo"}}})"));
}

}  // namespace
}  // namespace strata
