// Grammar-constrained generation: GBNF parsing (errors named with their line), matching a code
// point at a time against strings a grammar does and does not take, the JSON grammars, the
// vocabulary mask against a token-by-token reference, and sampling under a constraint.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/json_schema_grammar.h"
#include "chat/tool_calls.h"
#include "core/error.h"
#include "model/model.h"
#include "model/unicode.h"
#include "generation/grammar.h"
#include "generation/grammar_constraint.h"
#include "generation/sampler.h"

namespace strata {
namespace {

std::string shipped_model() { return std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf"; }

// Whether the grammar takes the whole text (every code point, then the root may end).
bool takes(const Grammar& g, const std::string& text) {
  GrammarState s(g);
  for (const Utf8Char& c : split_utf8(text))
    if (!s.advance(c.codepoint)) return false;
  return s.accepting();
}

std::string parse_error(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Grammar, ParsesGbnfAndMatchesWhatItDescribes) {
  const Grammar g = Grammar::parse(R"(# a comment
root ::= greeting " " name ("!" | "?")? tail
greeting ::= "hi" | "héllo"
name ::= [A-Z] [a-z]{1,3}
tail ::= [0-9]* ("." [^\n]+)?
)");
  EXPECT_TRUE(takes(g, "hi Bob"));
  EXPECT_TRUE(takes(g, "héllo Abcd!12.x y"));
  EXPECT_TRUE(takes(g, "hi Al?"));
  EXPECT_FALSE(takes(g, "hi B"));        // {1,3}: at least one lower-case letter
  EXPECT_FALSE(takes(g, "hi Abcde"));    // at most three
  EXPECT_FALSE(takes(g, "hello Bob"));   // é, not e
  EXPECT_FALSE(takes(g, "hi Bob."));     // "." needs a character after it
  EXPECT_FALSE(takes(g, "hi Bob.\n"));   // [^\n]
  const Grammar any = Grammar::parse("root ::= .+");
  EXPECT_TRUE(takes(any, "漢字🙂"));
  EXPECT_FALSE(takes(any, ""));
  // {m,} and {m}: bounds exactly.
  const Grammar counts = Grammar::parse("root ::= \"a\"{2} \"b\"{1,}");
  EXPECT_TRUE(takes(counts, "aab"));
  EXPECT_TRUE(takes(counts, "aabbbb"));
  EXPECT_FALSE(takes(counts, "ab"));
  EXPECT_FALSE(takes(counts, "aaab"));
}

TEST(Grammar, JsonObjectGrammarTakesJsonAndNothingElse) {
  const Grammar g = Grammar::parse(json_object_grammar());
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a": [1, -2.5e3, "x\"y", true, null, {}]})",
                         R"({"k":"\u00e9 ü"})", "{\n  \"a\": {\"b\": []}}"})
    EXPECT_TRUE(takes(g, ok)) << ok;
  for (const char* bad : {R"([])", R"({"a": 01})", R"({"a" 1})", R"({"a": tru})", R"({'a': 1})",
                          R"({"a": 1,})", "{\"a\": \"\n\"}", R"({"a": 1})" "x"})
    EXPECT_FALSE(takes(g, bad)) << bad;
}

TEST(Grammar, BadGrammarsAreRefusedNamingTheProblem) {
  EXPECT_EQ(parse_error("rot ::= \"a\""), "the grammar has no 'root' rule");
  EXPECT_EQ(parse_error("root ::= item"), "the grammar uses rule 'item' but never defines it");
  EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""), "the grammar is left-recursive at rule 'root'");
  EXPECT_EQ(parse_error("root ::= x\nx ::= y? x \"a\"\ny ::= \"b\""), "the grammar is left-recursive at rule 'x'");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "grammar line 2: rule 'root' is defined twice");
  EXPECT_EQ(parse_error("root ::= \"abc"), "grammar line 1: a literal is not closed");
  EXPECT_EQ(parse_error("root ::= [a-"), "grammar line 1: a character class is not closed");
  EXPECT_EQ(parse_error("root ::= [z-a]"), "grammar line 1: a character range ends below its start");
  EXPECT_EQ(parse_error("root ::= (\"a\""), "grammar line 1: a group is not closed");
  EXPECT_EQ(parse_error("\n\nroot = \"a\""), "grammar line 3: expected '::=' after 'root'");
  EXPECT_EQ(parse_error("root ::= * \"a\""), "grammar line 1: '*' repeats nothing");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"), "grammar line 1: a repetition's maximum is below its minimum");
  EXPECT_EQ(parse_error("root ::= \"a\"{5000}"), "grammar line 1: a repetition count above 1000");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar line 1: unknown escape '\\q'");
}

// Every sentence of a schema's grammar that this test spells is valid for the schema, and the
// grammar refuses what the schema refuses (a missing required key, a value of the wrong type).
TEST(Grammar, JsonSchemaGrammarsTakeWhatTheSchemaAccepts) {
  const auto grammar = [](const char* schema) {
    return Grammar::parse(json_schema_grammar(nlohmann::ordered_json::parse(schema)));
  };
  const Grammar person = grammar(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 4}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
      "nick": {"type": ["string", "null"]}}, "required": ["name", "age"]})");
  EXPECT_TRUE(takes(person, R"({"name": "Bo", "age": 3})"));
  EXPECT_TRUE(takes(person, R"({"name": "Bo", "age": -3, "tags": ["a", "b"], "nick": null})"));
  EXPECT_TRUE(takes(person, R"({"name": "Bo", "age": 3, "nick": "x"})"));
  EXPECT_FALSE(takes(person, R"({"age": 3})"));                        // name is required
  EXPECT_FALSE(takes(person, R"({"name": "Bobby", "age": 3})"));       // maxLength 4
  EXPECT_FALSE(takes(person, R"({"name": "Bo", "age": 3.5})"));        // an integer
  EXPECT_FALSE(takes(person, R"({"name": "Bo", "age": 3, "tags": ["c"]})"));
  EXPECT_FALSE(takes(person, R"({"name": "Bo", "age": 3, "tags": ["a", "a", "a"]})"));
  EXPECT_FALSE(takes(person, R"({"name": "Bo", "age": 3, "other": 1})"));

  const Grammar optional_first = grammar(R"({"properties": {"a": {"type": "boolean"},
      "b": {"const": 7}}, "required": ["b"]})");
  EXPECT_TRUE(takes(optional_first, R"({"b": 7})"));
  EXPECT_TRUE(takes(optional_first, R"({"a": true, "b": 7})"));
  EXPECT_FALSE(takes(optional_first, R"({, "b": 7})"));
  EXPECT_FALSE(takes(optional_first, R"({"b": 8})"));

  const Grammar tree = grammar(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}})");
  EXPECT_TRUE(takes(tree, R"({"v": 1, "kids": [{"v": 2.5}, {"v": 3, "kids": []}]})"));
  EXPECT_FALSE(takes(tree, R"({"v": 1, "kids": [{}]})"));

  const Grammar either = grammar(R"({"anyOf": [{"type": "integer"}, {"type": "array", "minItems": 2, "items": {"type": "null"}}]})");
  EXPECT_TRUE(takes(either, "12"));
  EXPECT_TRUE(takes(either, "[null, null]"));
  EXPECT_FALSE(takes(either, "[null]"));
}

std::string schema_error(const char* schema) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(schema));
  } catch (const SchemaError& e) {
    return e.keyword() + ": " + e.what();
  }
  return "";
}

TEST(Grammar, SchemaKeywordsThatCannotBeEnforcedAreRefusedByName) {
  EXPECT_EQ(schema_error(R"({"type": "string", "pattern": "(a)\\1"})"),
            "pattern: the JSON schema's 'pattern' has a backreference, which is not enforced");
  EXPECT_EQ(schema_error(R"({"type": "integer", "multipleOf": 5})"),
            "multipleOf: the JSON schema's 'multipleOf' is not a keyword strata can enforce");
  EXPECT_EQ(schema_error(R"({"oneOf": [{"type": "integer"}, {"minimum": 0}]})"),
            "oneOf: the JSON schema's 'oneOf' has branches that may take the same value (oneOf then rejects it): "
            "strata enforces oneOf where types, const or enum values or required keys tell them apart; anyOf otherwise");
  EXPECT_EQ(schema_error(R"({"type": "object", "patternProperties": {"^a": {}}})"),
            "patternProperties: the JSON schema's 'patternProperties' is not a keyword strata can enforce");
  EXPECT_EQ(schema_error(R"({"type": "uuid"})"), "type: the JSON schema's 'type' 'uuid' is not a JSON type");
  EXPECT_EQ(schema_error(R"({"$ref": "#/$defs/missing"})"),
            "$ref: the JSON schema's '$ref' '#/$defs/missing' does not name a schema in #/$defs or #/definitions");
  EXPECT_EQ(schema_error(R"({"properties": {"a": {}}, "required": ["b"]})"),
            "required: the JSON schema's 'required' names 'b', which is not among the properties");
  EXPECT_EQ(schema_error(R"({"type": "array", "maxItems": 100000})"),
            "maxItems: the JSON schema's 'maxItems' must be an integer from 0 to 1000");
}

// The mask (a walk of the vocabulary's trie, cached per state) equals asking token by token,
// at every step of a constrained generation, and EOS is allowed exactly where the grammar may end.
TEST(GrammarConstraint, MaskEqualsTheTokenByTokenReference) {
  const auto model = Model::load(shipped_model());
  const Tokenizer& tok = *model->tokenizer;
  auto grammar = std::make_shared<const Grammar>(Grammar::parse(
      "root ::= \"{\\\"n\\\": \" [0-9]{1,3} \", \\\"s\\\": \\\"\" [a-zé ]{0,12} \"\\\"}\""));
  GrammarConstraint c(grammar, tok);
  std::vector<uint8_t> mask;
  std::string text;
  for (int step = 0; step < 40; ++step) {
    c.mask(mask);
    int allowed = 0, first = -1;
    for (int32_t t = 0; t < tok.n_vocab(); ++t) {
      ASSERT_EQ(mask[static_cast<size_t>(t)] != 0, c.allows(t)) << "token " << t << " at step " << step;
      if (mask[static_cast<size_t>(t)]) {
        ++allowed;
        // Walk the rarest path: the last allowed token that is not EOS, so the test reaches the end.
        if (t != tok.eos()) first = t;
      }
    }
    ASSERT_GT(allowed, 0) << "no token allowed at step " << step << " after " << text;
    if (c.finished() || first < 0) break;
    c.accept(first);
    text += tok.token_bytes(first);
  }
  EXPECT_TRUE(c.allows(tok.eos())) << text;
  const Grammar check = Grammar::parse(
      "root ::= \"{\\\"n\\\": \" [0-9]{1,3} \", \\\"s\\\": \\\"\" [a-zé ]{0,12} \"\\\"}\"");
  EXPECT_TRUE(takes(check, text)) << text;
}

// A token that ends inside a UTF-8 character is allowed only when the grammar could take a
// character starting with those bytes; overlong forms never match ASCII.
TEST(GrammarConstraint, PartialCharactersAreAllowedOnlyWhereTheyCanComplete) {
  const auto model = Model::load(shipped_model());
  const Tokenizer& tok = *model->tokenizer;
  auto find_byte = [&](int b) {
    for (int32_t t = 0; t < tok.n_vocab(); ++t)
      if (tok.token_bytes(t) == std::string(1, static_cast<char>(b))) return t;
    return -1;
  };
  const int32_t c3 = find_byte(0xC3), a9 = find_byte(0xA9), f0 = find_byte(0xF0), x80 = find_byte(0x80);
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  ASSERT_GE(f0, 0);
  ASSERT_GE(x80, 0);
  GrammarConstraint letters(std::make_shared<const Grammar>(Grammar::parse("root ::= [a-zé]+")), tok);
  EXPECT_TRUE(letters.allows(c3));   // é is C3 A9
  EXPECT_FALSE(letters.allows(f0));  // no 4-byte character is in [a-zé]
  letters.accept(c3);
  EXPECT_TRUE(letters.allows(a9));
  EXPECT_FALSE(letters.allows(find_byte('a')));  // the character must complete first
  letters.accept(a9);
  EXPECT_TRUE(letters.allows(tok.eos()));
  GrammarConstraint brace(std::make_shared<const Grammar>(Grammar::parse("root ::= \"{\"")), tok);
  EXPECT_FALSE(brace.allows(f0));  // F0 80 81 BB would be an overlong '{'
  EXPECT_FALSE(brace.allows(x80));
  EXPECT_FALSE(brace.allows(tok.eos()));
}

// Under a constraint every sampled token is allowed; greedy picks the most likely allowed one.
TEST(GrammarConstraint, SamplingDrawsOnlyAllowedTokens) {
  const auto model = Model::load(shipped_model());
  const Tokenizer& tok = *model->tokenizer;
  auto grammar = std::make_shared<const Grammar>(Grammar::parse("root ::= [0-9]{1,4}"));
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 1000) / 100.0f;
  for (float temperature : {0.0f, 0.8f}) {
    SamplerParams p;
    p.temperature = temperature;
    p.seed = 3;
    Sampler sampler(p);
    GrammarConstraint c(grammar, tok);
    std::vector<uint8_t> mask;
    c.mask(mask);
    int32_t best = -1;
    for (int32_t t = 0; t < tok.n_vocab(); ++t)
      if (mask[static_cast<size_t>(t)] && (best < 0 || logits[static_cast<size_t>(t)] > logits[static_cast<size_t>(best)])) best = t;
    const int32_t t = sampler.sample(logits, {}, &c);
    ASSERT_GE(t, 0);
    EXPECT_TRUE(mask[static_cast<size_t>(t)]);
    if (temperature == 0.0f) {
      EXPECT_EQ(t, best);
    }
  }
  // Nothing allowed (every allowed token banned by logit_bias): -1, not a token outside the grammar.
  SamplerParams p;
  p.temperature = 0;
  GrammarConstraint c(grammar, tok);
  std::vector<uint8_t> mask;
  c.mask(mask);
  for (int32_t t = 0; t < tok.n_vocab(); ++t)
    if (mask[static_cast<size_t>(t)]) p.logit_bias.emplace_back(t, -INFINITY);
  Sampler banned(p);
  EXPECT_EQ(banned.sample(logits, {}, &c), -1);
}

// Reliability round 3 (issue 52): grammars and JSON schemas from a hostile client. Each case was
// a crash (stack overflow), a stall or gigabytes before its fix; each is now a one-line error
// naming the limit, found when the grammar compiles (before a request reaches the scheduler).
using OrderedJson = nlohmann::ordered_json;

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
  OrderedJson values = OrderedJson::array();
  for (int i = 0; i < 4100; ++i) values.push_back(fmt::format("v{}", i));
  const std::string gbnf = json_schema_grammar(OrderedJson{{"enum", values}});
  EXPECT_NE(parse_error(gbnf).find("more than 4096 paths"), std::string::npos);
  values.erase(values.begin() + 4000, values.end());
  const Grammar ok = Grammar::parse(json_schema_grammar(OrderedJson{{"enum", values}}));
  EXPECT_TRUE(takes(ok, "\"v3999\""));
}

std::string schema_error(const OrderedJson& schema) {
  try {
    json_schema_grammar(schema);
  } catch (const SchemaError& e) {
    return e.keyword() + ": " + e.what();
  }
  return "";
}

// Issue 52.3: a $ref chain of 20,000 (740 KB) overflowed the converter's stack.
TEST(HostileGrammar, SchemaRefChainsAreBounded) {
  OrderedJson defs = OrderedJson::object();
  const int n = 20000;
  for (int i = 0; i + 1 < n; ++i) defs[fmt::format("d{}", i)] = {{"$ref", fmt::format("#/$defs/d{}", i + 1)}};
  defs[fmt::format("d{}", n - 1)] = {{"type", "integer"}};
  const OrderedJson schema = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  EXPECT_NE(schema_error(schema).find("$ref: the JSON schema's '$ref' chain nests schemas deeper than 128"),
            std::string::npos)
      << schema_error(schema);
  // A short chain, and a recursive schema, still compile.
  const OrderedJson short_chain = {{"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"type", "integer"}}}}},
                            {"$ref", "#/$defs/a"}};
  EXPECT_TRUE(takes(Grammar::parse(json_schema_grammar(short_chain)), "42"));
  const OrderedJson tree = {{"$defs", {{"node", {{"type", "object"},
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
  const OrderedJson params = {
      {"$defs", {{"Address", {{"type", "object"},
                              {"properties", {{"city", {{"type", "string"}}}}},
                              {"required", {"city"}},
                              {"additionalProperties", false}}}}},
      {"type", "object"},
      {"properties", {{"home", {{"$ref", "#/$defs/Address"}}}}},
      {"required", {"home"}},
      {"additionalProperties", false}};
  const OrderedJson tools = OrderedJson::array({{{"type", "function"}, {"function", {{"name", "move"}, {"parameters", params}}}}});
  const Grammar g = Grammar::parse(tool_call_grammar(ToolCallStyle::Json, tools, ""));
  EXPECT_TRUE(takes(g, R"({"name": "move", "arguments": {"home": {"city": "Oslo"}}})"));
  EXPECT_FALSE(takes(g, R"({"name": "move", "arguments": {"home": {"town": "Oslo"}}})"));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "ping"}}])");

// Each style's grammar takes a call of a known tool written its way, arguments by the tool's
// schema, and nothing else; what it takes, parse_tool_calls reads back.
TEST(ToolCalls, EachStyleWritesAndReadsCalls) {
  struct StyleCase {
    ToolCallStyle style;
    const char* call;
  };
  const StyleCase cases[] = {
      {ToolCallStyle::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {ToolCallStyle::Mistral, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"},
      {ToolCallStyle::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
      {ToolCallStyle::Json, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(tool_call_style_name(c.style));
    const Grammar g = Grammar::parse(tool_call_grammar(c.style, kTools));
    EXPECT_TRUE(takes(g, c.call));
    const ParsedReply r = parse_tool_calls(c.style, c.call, kTools);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(r.calls[0].arguments), nlohmann::json::parse(R"({"city": "Paris"})"));
    EXPECT_TRUE(r.content.empty());
    // Only the named tool, when one is required by name.
    const Grammar only_ping = Grammar::parse(tool_call_grammar(c.style, kTools, "ping"));
    EXPECT_FALSE(takes(only_ping, c.call));
  }
  // The grammar refuses a call without the required argument, or of an unknown tool.
  const Grammar hermes = Grammar::parse(tool_call_grammar(ToolCallStyle::Hermes, kTools));
  EXPECT_FALSE(takes(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(takes(hermes, "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"));
  // Text that is not a call of a known tool stays content.
  EXPECT_TRUE(parse_tool_calls(ToolCallStyle::Json, "{\"name\": \"launch\", \"arguments\": {}}", kTools).calls.empty());
  const ParsedReply plain = parse_tool_calls(ToolCallStyle::Hermes, "  Paris is sunny.\n", kTools);
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_EQ(plain.content, "Paris is sunny.");
  // Two Hermes calls with text around them.
  const ParsedReply two = parse_tool_calls(
      ToolCallStyle::Hermes,
      "Checking. <tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call><tool_call>{\"name\": "
      "\"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}</tool_call>",
      kTools);
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[1].arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(two.content, "Checking.");
  EXPECT_EQ(tool_call_style(R"({{ '<tool_call>' }})"), ToolCallStyle::Hermes);
  EXPECT_EQ(tool_call_style("[TOOL_CALLS]"), ToolCallStyle::Mistral);
  EXPECT_EQ(tool_call_style("{{ chatml }}"), ToolCallStyle::Json);
}

}  // namespace
}  // namespace strata
