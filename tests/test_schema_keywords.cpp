// The JSON-schema keywords past the basic ones: integer and number ranges checked value by value
// against the bounds, patterns against std::regex (ECMAScript, what JSON Schema names) over
// every short string of a small alphabet, formats, keys other than the listed ones, allOf merged,
// oneOf only where its branches are told apart, and what stays refused by name.
// tools/reference/check_schema_keywords.py runs the same keywords through `strata run -j` and
// python3-jsonschema.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>

#include "chat/json_schema_grammar.h"
#include "chat/schema_numbers.h"
#include "chat/schema_strings.h"
#include "generation/grammar.h"
#include "model/unicode.h"

namespace strata {
namespace {

bool takes_text(const Grammar& g, const std::string& text) {
  GrammarState s(g);
  for (const Utf8Char& c : split_utf8(text))
    if (!s.advance(c.codepoint)) return false;
  return s.accepting();
}

// A grammar of one expression, with the string primitives patterns may use.
Grammar expression_grammar(const std::string& expr) {
  return Grammar::parse("root ::= " + expr + "\nchar ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n");
}

Grammar schema_grammar(const char* schema) {
  return Grammar::parse(json_schema_grammar(nlohmann::ordered_json::parse(schema)));
}

std::string refusal(const char* schema) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(schema));
  } catch (const SchemaError& e) {
    return e.keyword() + ": " + e.what();
  }
  return "";
}

TEST(SchemaNumbers, IntegerRangesTakeExactlyTheIntegersInside) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> end(-1500, 1500);
  std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 150}, {1, 9}, {0, 0}, {-5, 5}, {-150, -7}, {10, 99}, {100, 1000}, {7, 7}, {-1, -1},
      {0, std::nullopt}, {std::nullopt, 0}, {3, std::nullopt}, {std::nullopt, -12}, {-999, 999}};
  for (int i = 0; i < 40; ++i) {
    int a = end(rng), b = end(rng);
    ranges.emplace_back(std::min(a, b), std::max(a, b));
  }
  for (const auto& [lo, hi] : ranges) {
    const Grammar g = expression_grammar(integer_range_gbnf(lo, hi));
    const std::string name = fmt::format("[{}, {}]", lo ? std::to_string(*lo) : "open", hi ? std::to_string(*hi) : "open");
    for (int v = -2000; v <= 2000; ++v)
      ASSERT_EQ(takes_text(g, std::to_string(v)), (!lo || v >= *lo) && (!hi || v <= *hi)) << name << " at " << v;
    EXPECT_FALSE(takes_text(g, "-0")) << name;
    EXPECT_FALSE(takes_text(g, "007")) << name;
    EXPECT_FALSE(takes_text(g, "1.0")) << name;
  }
  // Open sides reach the 16 digits the plain integer rule takes; closed sides past them stay.
  const Grammar open = expression_grammar(integer_range_gbnf(0, std::nullopt));
  EXPECT_TRUE(takes_text(open, "9999999999999999"));
  EXPECT_FALSE(takes_text(open, "10000000000000000"));
  const Grammar big = expression_grammar(integer_range_gbnf(std::nullopt, 9'000'000'000'000'000'000));
  EXPECT_TRUE(takes_text(big, "9000000000000000000"));
  EXPECT_FALSE(takes_text(big, "9000000000000000001"));
  EXPECT_TRUE(takes_text(big, "-9999999999999999"));
}

TEST(SchemaNumbers, NumberRangesWriteOnlyValuesInsideAndEveryWholeOne) {
  struct Case {
    NumberBounds b;
    std::vector<const char*> inside;  // must be taken
  };
  const std::vector<Case> cases = {
      {{0.0, 1.0}, {"0", "1", "0.5", "0.999"}},
      {{0.0, 1.0, true, true}, {"0.5", "0.01"}},
      {{-2.5, 3.0}, {"-2", "3", "-1.75", "2.5", "0.0"}},
      {{std::nullopt, -1.0, false, true}, {"-2", "-1.5", "-1000.25"}},
      {{10.0, std::nullopt}, {"10", "10.5", "12345"}},
  };
  for (const auto& c : cases) {
    const Grammar g = expression_grammar(number_range_gbnf(c.b));
    for (const char* v : c.inside) EXPECT_TRUE(takes_text(g, v)) << v;
    // Every candidate the grammar takes is inside the bounds.
    for (int whole = -40; whole <= 40; ++whole)
      for (const char* frac : {"", ".0", ".25", ".5", ".75", ".999"}) {
        for (const char* sign : {"", "-"}) {
          if (*sign && whole < 0) continue;
          const std::string text = fmt::format("{}{}{}", sign, whole, frac);
          const double v = std::stod(text);
          const bool inside = (!c.b.lower || (c.b.lower_exclusive ? v > *c.b.lower : v >= *c.b.lower)) &&
                              (!c.b.upper || (c.b.upper_exclusive ? v < *c.b.upper : v <= *c.b.upper));
          if (takes_text(g, text)) {
            EXPECT_TRUE(inside) << text;
          }
          if (inside && *frac == 0 && !(*sign && whole == 0)) {
            EXPECT_TRUE(takes_text(g, text)) << text;
          }
        }
      }
  }
  EXPECT_EQ(number_range_gbnf({1e300, std::nullopt}), "");  // beyond what is written exactly
}

// Every string of up to `len` characters over `alphabet`.
std::vector<std::string> all_strings(const std::string& alphabet, size_t len) {
  std::vector<std::string> out{""};
  for (size_t i = 0, from = 0; i < len; ++i) {
    const size_t to = out.size();
    for (size_t k = from; k < to; ++k)
      for (char c : alphabet) out.push_back(out[k] + c);
    from = to;
  }
  return out;
}

TEST(SchemaStrings, PatternsTakeWhatTheRegexFindsOverShortStrings) {
  const std::vector<const char*> patterns = {
      "^a+$", "^[a-c]{2,3}$", "^(ab|c)*$", "b", "^a", "c$", "^\\d{3}-\\d{2}$", "^[^a]b?$",
      "^(?:a|b)+c{1,2}$", "^\\w\\s\\W$", "^.{2}$", "^a.c$", "^-?[0-9]+(\\.[0-9]+)?$", "^(a)[b-]{0,2}$",
      "^$", "a|b|c$", "^[\\d.]+$", "^a+?b*?$"};
  const auto candidates = all_strings("abc1-. ", 4);
  for (const char* p : patterns) {
    const Grammar g = expression_grammar(pattern_string_gbnf(p));
    const std::regex re(p, std::regex::ECMAScript);
    for (const auto& text : candidates) {
      const std::string json = nlohmann::json(text).dump();
      ASSERT_EQ(takes_text(g, json), std::regex_search(text, re)) << p << " on '" << text << "'";
    }
  }
  // A named group is a group (std::regex has none to compare with).
  const Grammar named = expression_grammar(pattern_string_gbnf("^(?<x>a)(?P<y>b)$"));
  EXPECT_TRUE(takes_text(named, R"("ab")"));
  EXPECT_FALSE(takes_text(named, R"("a")"));
  // Characters JSON escapes are written escaped; a quote only as \".
  const Grammar quote = expression_grammar(pattern_string_gbnf("^a\"\\\\$"));
  EXPECT_TRUE(takes_text(quote, R"("a\"\\")"));
  EXPECT_FALSE(takes_text(quote, R"("a"\")"));
  const Grammar newline = expression_grammar(pattern_string_gbnf("^a\\nb$"));
  EXPECT_TRUE(takes_text(newline, R"("a\nb")"));
  EXPECT_FALSE(takes_text(newline, "\"a\nb\""));
}

TEST(SchemaStrings, UnenforceablePatternsAreRefusedNamingTheConstruct) {
  const auto why = [](const char* p) {
    try {
      pattern_string_gbnf(p);
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), "pattern");
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(why("^(a)\\1$"), "the JSON schema's 'pattern' has a backreference, which is not enforced");
  EXPECT_EQ(why("^a(?=b)"), "the JSON schema's 'pattern' has a lookaround or group flag ('(?'), which is not enforced");
  EXPECT_EQ(why("\\bword"), "the JSON schema's 'pattern' has a word boundary ('\\b'), which is not enforced");
  EXPECT_EQ(why("a^b"), "the JSON schema's 'pattern' has an anchor inside it (only a leading ^ and a trailing $ are enforced)");
  EXPECT_EQ(why("^a{2000}$"), "the JSON schema's 'pattern' repeats something more than 1000 times");
  EXPECT_EQ(why("^(a$"), "the JSON schema's 'pattern' has a group that is not closed");
  EXPECT_EQ(why("^a)$"), "the JSON schema's 'pattern' has a ')' that closes no group");
  EXPECT_EQ(why("^[a-"), "the JSON schema's 'pattern' has a character class that is not closed");
  EXPECT_EQ(why("*a"), "the JSON schema's 'pattern' has a '*' that repeats nothing");
  EXPECT_EQ(why("^\\p{L}$"), "the JSON schema's 'pattern' has a Unicode property class ('\\p'), which is not enforced");
  EXPECT_EQ(why(std::string(100, '(').c_str()), "the JSON schema's 'pattern' nests groups deeper than 64");
}

TEST(SchemaStrings, FormatsTakeValidValuesOnly) {
  const auto format = [](const char* f) { return expression_grammar(*format_string_gbnf(f)); };
  const Grammar date = format("date");
  EXPECT_TRUE(takes_text(date, R"("2026-12-07")"));
  EXPECT_TRUE(takes_text(date, R"("1999-04-30")"));
  EXPECT_FALSE(takes_text(date, R"("2026-02-30")"));
  EXPECT_FALSE(takes_text(date, R"("2026-04-31")"));
  EXPECT_FALSE(takes_text(date, R"("2026-13-01")"));
  EXPECT_FALSE(takes_text(date, R"("2026-1-01")"));
  const Grammar time = format("time");
  EXPECT_TRUE(takes_text(time, R"("23:59:59Z")"));
  EXPECT_TRUE(takes_text(time, R"("08:30:00.125+02:00")"));
  EXPECT_FALSE(takes_text(time, R"("24:00:00Z")"));
  EXPECT_FALSE(takes_text(time, R"("12:00:00")"));  // RFC 3339 times carry an offset
  EXPECT_TRUE(takes_text(format("date-time"), R"("2026-12-07T10:00:00Z")"));
  EXPECT_TRUE(takes_text(format("uuid"), R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(takes_text(format("uuid"), R"("123e4567e89b12d3a456426614174000")"));
  EXPECT_TRUE(takes_text(format("ipv4"), R"("192.168.0.255")"));
  EXPECT_FALSE(takes_text(format("ipv4"), R"("192.168.0.256")"));
  EXPECT_FALSE(takes_text(format("ipv4"), R"("01.2.3.4")"));
  EXPECT_TRUE(takes_text(format("email"), R"("a.b+c@example.co.uk")"));
  EXPECT_FALSE(takes_text(format("email"), R"("nobody")"));
  EXPECT_FALSE(format_string_gbnf("hostname").has_value());
}

TEST(SchemaStrings, KeysOtherThanTheListedOnes) {
  const Grammar g = expression_grammar(key_not_in_gbnf({"a", "ab", "é"}));
  for (const char* ok : {R"("")", R"("b")", R"("abc")", R"("aa")", R"("e")", R"("éé")"})
    EXPECT_TRUE(takes_text(g, ok)) << ok;
  for (const char* bad : {R"("a")", R"("ab")", R"("é")", R"("\u0061")"}) EXPECT_FALSE(takes_text(g, bad)) << bad;
  EXPECT_FALSE(takes_text(expression_grammar(key_not_in_gbnf({""})), R"("")"));
}

TEST(SchemaKeywords, ObjectsTakeExtraKeysOfTheirSchemaButNotTheListedOnesAgain) {
  const Grammar g = schema_grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}},
      "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(takes_text(g, R"({"a": 1, "x": "s", "y": ""})"));
  EXPECT_TRUE(takes_text(g, R"({"x": "s"})"));
  EXPECT_TRUE(takes_text(g, R"({})"));
  EXPECT_FALSE(takes_text(g, R"({"a": 1, "a": "s"})"));
  EXPECT_FALSE(takes_text(g, R"({"a": 1, "x": 2})"));
  EXPECT_FALSE(takes_text(g, R"({"a": 1,})"));
  const Grammar required = schema_grammar(R"({"properties": {"a": {"type": "integer"}}, "required": ["a"],
      "additionalProperties": true})");
  EXPECT_TRUE(takes_text(required, R"({"a": 1, "b": [null]})"));
  EXPECT_FALSE(takes_text(required, R"({"b": 1})"));
}

TEST(SchemaKeywords, RangesFormatsAndPatternsInsideSchemas) {
  const Grammar g = schema_grammar(R"({"type": "object", "properties": {
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
      "born": {"type": "string", "format": "date"},
      "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}},
      "required": ["age", "score", "born", "code"], "additionalProperties": false})");
  EXPECT_TRUE(takes_text(g, R"({"age": 42, "score": 0.5, "born": "1984-02-28", "code": "ABC-12"})"));
  EXPECT_TRUE(takes_text(g, R"({"age": 0, "score": 1, "born": "1984-02-28", "code": "ABC-1"})"));
  EXPECT_FALSE(takes_text(g, R"({"age": 151, "score": 0.5, "born": "1984-02-28", "code": "ABC-12"})"));
  EXPECT_FALSE(takes_text(g, R"({"age": -1, "score": 0.5, "born": "1984-02-28", "code": "ABC-12"})"));
  EXPECT_FALSE(takes_text(g, R"({"age": 4, "score": 0, "born": "1984-02-28", "code": "ABC-12"})"));
  EXPECT_FALSE(takes_text(g, R"({"age": 4, "score": 0.5, "born": "1984-02-30", "code": "ABC-12"})"));
  EXPECT_FALSE(takes_text(g, R"({"age": 4, "score": 0.5, "born": "1984-02-28", "code": "AB-12"})"));
  // Draft 4's boolean exclusiveMinimum, and keywords without a type.
  const Grammar draft4 = schema_grammar(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})");
  EXPECT_FALSE(takes_text(draft4, "5"));
  EXPECT_TRUE(takes_text(draft4, "6"));
  const Grammar untyped = schema_grammar(R"({"maxLength": 2})");
  EXPECT_TRUE(takes_text(untyped, R"("ab")"));
  EXPECT_FALSE(takes_text(untyped, R"("abc")"));
}

TEST(SchemaKeywords, AllOfMergesItsBranches) {
  const Grammar g = schema_grammar(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
      {"properties": {"a": {"maximum": 9}, "b": {"type": "string"}}, "required": ["b"]}]})");
  EXPECT_TRUE(takes_text(g, R"({"a": 3, "b": "x"})"));
  EXPECT_FALSE(takes_text(g, R"({"a": 3})"));
  EXPECT_FALSE(takes_text(g, R"({"a": 10, "b": "x"})"));
  EXPECT_FALSE(takes_text(g, R"({"a": -1, "b": "x"})"));
  // A closed branch leaves out what it does not list.
  const Grammar closed = schema_grammar(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
      {"properties": {"b": {}}}]})");
  EXPECT_TRUE(takes_text(closed, R"({"a": 1})"));
  EXPECT_FALSE(takes_text(closed, R"({"a": 1, "b": 2})"));
  // Through $ref, and anyOf's siblings holding in each branch.
  const Grammar refs = schema_grammar(R"({"$defs": {"pos": {"type": "integer", "minimum": 1}},
      "allOf": [{"$ref": "#/$defs/pos"}, {"maximum": 3}]})");
  EXPECT_TRUE(takes_text(refs, "3"));
  EXPECT_FALSE(takes_text(refs, "4"));
  EXPECT_FALSE(takes_text(refs, "0"));
  const Grammar sibling = schema_grammar(R"({"type": "integer", "anyOf": [{"maximum": 2}, {"minimum": 8}]})");
  EXPECT_TRUE(takes_text(sibling, "1"));
  EXPECT_TRUE(takes_text(sibling, "9"));
  EXPECT_FALSE(takes_text(sibling, "5"));
  EXPECT_FALSE(takes_text(sibling, "1.5"));
}

TEST(SchemaKeywords, OneOfWhereItsBranchesAreToldApart) {
  const Grammar by_type = schema_grammar(R"({"oneOf": [{"type": "integer"}, {"type": "string"}]})");
  EXPECT_TRUE(takes_text(by_type, "3"));
  EXPECT_TRUE(takes_text(by_type, R"("x")"));
  EXPECT_FALSE(takes_text(by_type, "null"));
  const Grammar tagged = schema_grammar(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}}, "required": ["kind"]}]})");
  EXPECT_TRUE(takes_text(tagged, R"({"kind": "cat", "lives": 9})"));
  EXPECT_TRUE(takes_text(tagged, R"({"kind": "dog", "good": true})"));
  EXPECT_FALSE(takes_text(tagged, R"({"kind": "cow"})"));
  const Grammar closed = schema_grammar(R"({"oneOf": [
      {"properties": {"a": {}}, "required": ["a"], "additionalProperties": false},
      {"properties": {"b": {}}, "required": ["b"], "additionalProperties": false}]})");
  EXPECT_TRUE(takes_text(closed, R"({"b": 1})"));
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})").substr(0, 70),
            "oneOf: the JSON schema's 'oneOf' has branches that may take the same v");
}

TEST(SchemaKeywords, WhatCannotBeEnforcedIsRefusedByName) {
  EXPECT_EQ(refusal(R"({"type": "integer", "multipleOf": 3})"),
            "multipleOf: the JSON schema's 'multipleOf' is not a keyword strata can enforce");
  EXPECT_EQ(refusal(R"({"type": "array", "uniqueItems": true})"),
            "uniqueItems: the JSON schema's 'uniqueItems' is not a keyword strata can enforce");
  EXPECT_EQ(refusal(R"({"not": {"type": "string"}})"), "not: the JSON schema's 'not' is not a keyword strata can enforce");
  EXPECT_EQ(refusal(R"({"type": "string", "format": "hostname"})"),
            "format: the JSON schema's 'format' 'hostname' is not a format strata can enforce (date, time, "
            "date-time, uuid, ipv4, email)");
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})"),
            "minimum: the JSON schema's 'minimum' leaves no integer within the bounds (or is beyond 9e18)");
  EXPECT_EQ(refusal(R"({"type": "integer", "minimum": "5"})"), "minimum: the JSON schema's 'minimum' must be a number");
  EXPECT_EQ(refusal(R"({"type": "string", "pattern": "^a$", "maxLength": 3})"),
            "pattern: the JSON schema's 'pattern' beside format, minLength or maxLength is not enforced");
  EXPECT_EQ(refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"),
            "allOf: the JSON schema's 'allOf' has branches whose types no value has at once");
  EXPECT_EQ(refusal(R"({"allOf": [{"const": 1}, {"const": 2}]})"),
            "allOf: the JSON schema's 'allOf' has branches that set 'const' differently");
  EXPECT_EQ(refusal(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"),
            "allOf: the JSON schema's 'allOf' nests deeper than 32 levels");
  // Hostile: self-reference that doubles at every level stops at the depth bound at once; breadth
  // is bounded in all.
  EXPECT_EQ(refusal(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"),
            "allOf: the JSON schema's 'allOf' nests deeper than 32 levels");
  const auto refused = [](const nlohmann::ordered_json& schema) {
    try {
      json_schema_grammar(schema);
    } catch (const SchemaError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::ordered_json wide_all = {{"allOf", nlohmann::ordered_json::array()}};
  for (int i = 0; i < 5000; ++i) wide_all["allOf"].push_back({{"type", "integer"}});
  EXPECT_EQ(refused(wide_all), "the JSON schema's 'allOf' merges more than 4096 branches in all");
  nlohmann::ordered_json wide_any = {{"anyOf", nlohmann::ordered_json::array()}};
  for (int i = 0; i < 20001; ++i) wide_any["anyOf"].push_back({{"type", "integer"}});
  EXPECT_EQ(refused(wide_any),
            "the JSON schema expands into more than 20000 schemas (allOf, anyOf and $ref together)");
  nlohmann::ordered_json many = {{"oneOf", nlohmann::ordered_json::array()}};
  for (int i = 0; i < 300; ++i) many["oneOf"].push_back({{"const", i}});
  try {
    json_schema_grammar(many);
    ADD_FAILURE() << "300 oneOf branches were compared";
  } catch (const SchemaError& e) {
    EXPECT_EQ(std::string(e.what()), "the JSON schema's 'oneOf' has more than 256 branches");
  }
}

}  // namespace
}  // namespace strata
