#include "chat/json_schema_grammar.h"

#include <fmt/format.h>

#include "chat/schema_combine.h"
#include "chat/schema_numbers.h"
#include "chat/schema_strings.h"

#include <map>
#include <set>
#include <vector>

namespace strata {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxCount = 1000;  // minItems/maxItems/minLength/maxLength the grammar spells out
constexpr int kMaxDepth = 128;   // schemas inside schemas, $ref chains included
// Schemas visited in all: allOf merges copies (not memoized as $ref targets are), so a schema
// whose branches refer to themselves twice would double at each of kMaxDepth levels.
constexpr int kMaxVisits = 20000;
constexpr size_t kMaxOneOfBranches = 256;  // compared pairwise

// The primitive rules every schema grammar shares.
constexpr const char* kPrimitives = R"(ws ::= | " "
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\"" ws
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? ws
boolean ::= ("true" | "false") ws
null ::= "null" ws
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
)";

// A GBNF literal for text (quotes, backslashes and control characters escaped).
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  std::string run() {
    const std::string top = visit(root_, "root");
    std::string out = "root ::= " + top + "\n";
    for (const auto& r : rules_) out += r + "\n";
    return out + kPrimitives;
  }

 private:
  [[noreturn]] static void refuse(const std::string& keyword, const std::string& why) {
    throw SchemaError(keyword, fmt::format("the JSON schema's '{}' {}", keyword, why));
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name;
    for (char c : hint) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    name = fmt::format("s{}-{}", rules_.size(), name.substr(0, 40));
    rules_.push_back(name + " ::= " + body);
    return name;
  }

  static int count(const Json& s, const char* key, int dflt) {
    if (!s.contains(key)) return dflt;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxCount)
      refuse(key, fmt::format("must be an integer from 0 to {}", kMaxCount));
    return static_cast<int>(v.get<int64_t>());
  }

  // `item` repeated from min to max times (max < 0: unbounded), separated by `sep`.
  static std::string repeated(const std::string& item, const std::string& sep, int min, int max) {
    if (max == 0) return "";
    std::string first = item;
    std::string rest = "(" + sep + " " + item + ")";
    const std::string bounds = max < 0 ? fmt::format("{{{},}}", std::max(0, min - 1))
                                       : fmt::format("{{{},{}}}", std::max(0, min - 1), max - 1);
    const std::string seq = first + " " + rest + bounds;
    return min == 0 ? "(" + seq + ")?" : seq;
  }

  // One level deeper for the life of a visit: a $ref chain of 20,000 is refused, not recursed.
  struct Deeper {
    explicit Deeper(Converter& c) : c_(c) {
      if (++c_.depth_ > kMaxDepth)
        refuse("$ref", fmt::format("chain nests schemas deeper than {} levels", kMaxDepth));
    }
    ~Deeper() { --c_.depth_; }
    Converter& c_;
  };

  // A schema with $defs (or definitions) is where the references inside it are resolved: the
  // whole schema, or a tool's parameters inside the call schema built around them.
  struct Scope {
    Scope(Converter& c, const Json& s) : c_(c) {
      pushed_ = s.is_object() && (s.contains("$defs") || s.contains("definitions"));
      if (pushed_) c_.scopes_.push_back(&s);
    }
    ~Scope() {
      if (pushed_) c_.scopes_.pop_back();
    }
    Converter& c_;
    bool pushed_ = false;
  };

  std::string visit(const Json& s, const std::string& hint) {
    const Deeper deeper(*this);
    if (++visits_ > kMaxVisits)
      throw SchemaError("schema", fmt::format("the JSON schema expands into more than {} schemas (allOf, anyOf "
                                              "and $ref together)", kMaxVisits));
    const Scope scope(*this, s);
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse("false", "schema accepts nothing");
      return "value";
    }
    if (!s.is_object()) refuse(hint, "must be a schema (an object)");
    static const std::set<std::string> annotations = {"title", "description", "default", "examples",
                                                      "$schema", "$id", "$comment", "strict",
                                                      "$defs", "definitions"};
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
        "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!annotations.count(it.key()) && !known.count(it.key()))
        refuse(it.key(), "is not a keyword strata can enforce");
    if (s.contains("$ref")) return reference(s["$ref"]);
    if (s.contains("allOf")) {
      const Json merged = merge_all_of(s, resolver());
      return visit(merged, hint);
    }
    if (s.contains("const")) return add_rule(hint, literal(s["const"].dump()) + " ws");
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) refuse("enum", "must be a non-empty array");
      std::string alts;
      for (const auto& v : s["enum"]) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      return add_rule(hint, "(" + alts + ") ws");
    }
    if (s.contains("anyOf")) return any_of(s, "anyOf", hint);
    if (s.contains("oneOf")) return any_of(s, "oneOf", hint);
    if (!s.contains("type")) return untyped(s, hint);
    const Json& type = s["type"];
    if (type.is_array()) {
      std::string alts;
      for (const auto& t : type) {
        Json one = s;
        one["type"] = t;
        alts += (alts.empty() ? "" : " | ") + visit(one, hint);
      }
      if (alts.empty()) refuse("type", "is an empty list");
      return add_rule(hint, alts);
    }
    if (!type.is_string()) refuse("type", "must be a string or a list of them");
    const std::string t = type.get<std::string>();
    if (t == "object") return object(s, hint);
    if (t == "array") return array(s, hint);
    if (t == "string") return string(s, hint);
    if (t == "integer" || t == "number") return number(s, t, hint);
    if (t == "boolean" || t == "null") return t;
    refuse("type", fmt::format("'{}' is not a JSON type", t));
  }

  // The schema `#/$defs/name` (or `#/definitions/name`) names: in the innermost schema around
  // the reference that defines it, else the root.
  const Json* resolve(const std::string& r) const {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) != 0) continue;
      const std::string section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
      const std::string name = r.substr(std::string(prefix).size());
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
        if ((*it)->contains(section) && (**it)[section].is_object() && (**it)[section].contains(name))
          return &(**it)[section][name];
      if (root_.is_object() && root_.contains(section) && root_[section].is_object() &&
          root_[section].contains(name))
        return &root_[section][name];
    }
    return nullptr;
  }

  std::string reference(const Json& ref) {
    if (!ref.is_string()) refuse("$ref", "must be a string");
    const std::string r = ref.get<std::string>();
    const Json* target = resolve(r);
    if (!target) refuse("$ref", fmt::format("'{}' does not name a schema in #/$defs or #/definitions", r));
    const auto it = refs_.find(target);
    if (it != refs_.end()) return it->second;
    // The rule's name first, so a recursive schema refers to itself.
    const std::string rule = fmt::format("ref-{}", refs_.size());
    refs_[target] = rule;
    const std::string name = r.substr(r.rfind('/') + 1);
    rules_.push_back(rule + " ::= " + visit(*target, name));
    return rule;
  }

  std::string string(const Json& s, const std::string& hint) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) refuse("pattern", "must be a string");
      if (lengths || s.contains("format")) refuse("pattern", "beside format, minLength or maxLength is not enforced");
      return add_rule(hint, pattern_string_gbnf(s["pattern"].get<std::string>()) + " ws");
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) refuse("format", "must be a string");
      if (lengths) refuse("format", "beside minLength or maxLength is not enforced");
      const std::string f = s["format"].get<std::string>();
      const auto g = format_string_gbnf(f);
      if (!g) refuse("format", fmt::format("'{}' is not a format strata can enforce (date, time, date-time, uuid, ipv4, email)", f));
      return add_rule(hint, *g + " ws");
    }
    const int min = count(s, "minLength", 0), max = count(s, "maxLength", -1);
    if (max >= 0 && max < min) refuse("maxLength", "is below minLength");
    if (min == 0 && max < 0) return "string";
    const std::string bounds = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    return add_rule(hint, "\"\\\"\" char" + bounds + " \"\\\"\" ws");
  }

  std::string array(const Json& s, const std::string& hint) {
    const std::string item = s.contains("items") ? visit(s["items"], hint + "-item") : "value";
    const int min = count(s, "minItems", 0), max = count(s, "maxItems", -1);
    if (max >= 0 && max < min) refuse("maxItems", "is below minItems");
    return add_rule(hint, "\"[\" ws " + repeated(item, "\",\" ws", min, max) + " \"]\" ws");
  }

  std::string object(const Json& s, const std::string& hint) {
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) refuse("required", "must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) refuse("required", "must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    const bool has_props = s.contains("properties");
    if (has_props && !s["properties"].is_object()) refuse("properties", "must be an object");
    // Keys beyond the properties: written only where additionalProperties is given (true or a
    // schema); left out where it is absent, which the schema allows.
    const Json* extra_value = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (extra_value && extra_value->is_boolean() && !extra_value->get<bool>()) extra_value = nullptr;
    if (extra_value && !has_props) {  // a map: any keys, values of one schema
      const std::string v = extra_value->is_boolean() ? "value" : visit(*extra_value, hint + "-value");
      const std::string kv = "string \":\" ws " + v;
      return add_rule(hint, "\"{\" ws " + repeated(kv, "\",\" ws", 0, -1) + " \"}\" ws");
    }
    std::vector<std::pair<std::string, bool>> props;  // rule of "key": value, required
    std::vector<std::string> names;
    if (has_props) {
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        const std::string v = visit(it.value(), hint + "-" + it.key());
        props.emplace_back(add_rule(hint + "-" + it.key() + "-kv", literal(Json(it.key()).dump()) + " ws \":\" ws " + v),
                           required.count(it.key()) > 0);
        names.push_back(it.key());
      }
    }
    for (const auto& r : required)
      if (!has_props || !s["properties"].contains(r))
        refuse("required", fmt::format("names '{}', which is not among the properties", r));
    std::string extra;
    if (extra_value) {
      const std::string v = extra_value->is_boolean() ? "value" : visit(*extra_value, hint + "-extra-value");
      extra = add_rule(hint + "-extra", key_not_in_gbnf(names) + " ws \":\" ws " + v);
    }
    return add_rule(hint, "\"{\" ws " + members(props, extra, hint) + "\"}\" ws");
  }

  // The properties in the schema's order, an optional one maybe left out (commas only between),
  // then any number of `extra` pairs (none if empty). Built from the end: tail is what may
  // follow once something was written, head what may come first.
  std::string members(const std::vector<std::pair<std::string, bool>>& props, const std::string& extra,
                      const std::string& hint) {
    std::string tail, head;  // empty: nothing may come
    if (!extra.empty()) {
      tail = add_rule(hint + "-more", "(\",\" ws " + extra + ")*");
      head = add_rule(hint + "-extras", "(" + extra + " " + tail + ")?");
    }
    for (size_t i = props.size(); i-- > 0;) {
      const auto& [kv, req] = props[i];
      const std::string after = tail.empty() ? "" : " " + tail;
      const std::string first = kv + after;
      const std::string new_head = req ? first : head.empty() ? "(" + first + ")?" : first + " | " + head;
      tail = add_rule(hint + "-tail", req ? "\",\" ws " + kv + after : "(\",\" ws " + kv + ")?" + after);
      head = add_rule(hint + "-head", new_head);
    }
    return head.empty() ? "" : head + " ";
  }

  SchemaResolver resolver() {
    return [this](const Json& s) -> const Json& {
      if (!s.is_object() || !s.contains("$ref")) return s;
      if (!s["$ref"].is_string()) refuse("$ref", "must be a string");
      const Json* target = resolve(s["$ref"].get<std::string>());
      if (!target) refuse("$ref", fmt::format("'{}' does not name a schema in #/$defs or #/definitions", s["$ref"].get<std::string>()));
      return *target;
    };
  }

  // anyOf, or oneOf where its branches never take the same value; keywords beside the list hold
  // in every branch.
  std::string any_of(const Json& s, const char* key, const std::string& hint) {
    const Json& branches = s[key];
    if (!branches.is_array() || branches.empty()) refuse(key, "must be a non-empty array");
    if (std::string(key) == "oneOf" && branches.size() > kMaxOneOfBranches)
      refuse(key, fmt::format("has more than {} branches", kMaxOneOfBranches));
    if (std::string(key) == "oneOf")
      for (size_t i = 0; i < branches.size(); ++i)
        for (size_t j = i + 1; j < branches.size(); ++j)
          if (!never_both(branches[i], branches[j], resolver()))
            refuse(key, "has branches that may take the same value (oneOf then rejects it): strata enforces "
                        "oneOf where types, const or enum values or required keys tell them apart; anyOf otherwise");
    Json beside = s;
    for (const char* k : {key, "$defs", "definitions", "title", "description", "default", "examples", "$comment"})
      beside.erase(k);
    std::string alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string name = fmt::format("{}-{}", hint, i);
      const std::string alt = beside.empty() ? visit(branches[i], name)
                                             : visit(Json{{"allOf", Json::array({beside, branches[i]})}}, name);
      alts += (alts.empty() ? "" : " | ") + alt;
    }
    return add_rule(hint, alts);
  }

  // A schema without a type constrains the kind of value its keywords apply to.
  std::string untyped(const Json& s, const std::string& hint) {
    const auto has = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (has({"properties", "additionalProperties", "required"})) return object(s, hint);
    if (has({"items", "minItems", "maxItems"})) return array(s, hint);
    if (has({"minLength", "maxLength", "pattern", "format"})) return string(s, hint);
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) return number(s, "number", hint);
    return "value";  // no constraint: any JSON value
  }

  // The tightest bound on each side; draft 4's boolean exclusiveMinimum/Maximum read as such.
  NumberBounds bounds(const Json& s) {
    NumberBounds b;
    const auto read = [&](const char* k) -> std::optional<double> {
      if (!s.contains(k) || s[k].is_boolean()) return std::nullopt;
      if (!s[k].is_number()) refuse(k, "must be a number");
      return s[k].get<double>();
    };
    const auto flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
    const auto tighten = [](std::optional<double>& bound, bool& exclusive, std::optional<double> v, bool ex, bool lower) {
      if (!v) return;
      if (!bound || (lower ? *v > *bound : *v < *bound) || (*v == *bound && ex)) bound = v, exclusive = ex;
    };
    tighten(b.lower, b.lower_exclusive, read("minimum"), flag("exclusiveMinimum"), true);
    tighten(b.lower, b.lower_exclusive, read("exclusiveMinimum"), true, true);
    tighten(b.upper, b.upper_exclusive, read("maximum"), flag("exclusiveMaximum"), false);
    tighten(b.upper, b.upper_exclusive, read("exclusiveMaximum"), true, false);
    return b;
  }

  std::string number(const Json& s, const std::string& type, const std::string& hint) {
    const NumberBounds b = bounds(s);
    if (!b.lower && !b.upper) return type;
    const char* key = s.contains("minimum") ? "minimum" : s.contains("exclusiveMinimum") ? "exclusiveMinimum"
                      : s.contains("maximum") ? "maximum" : "exclusiveMaximum";
    if (type == "integer") {
      const auto span = integers_within(b);
      if (!span) refuse(key, "leaves no integer within the bounds (or is beyond 9e18)");
      return add_rule(hint, integer_range_gbnf(span->lo, span->hi) + " ws");
    }
    const std::string g = number_range_gbnf(b);
    if (g.empty())
      refuse(key, "leaves no number strata writes within the bounds (whole numbers, and decimals whose "
                  "integer part keeps them inside; nothing beyond 9e18)");
    return add_rule(hint, g + " ws");
  }

  const Json& root_;
  std::vector<std::string> rules_;
  std::map<const Json*, std::string> refs_;  // a referenced schema's rule
  std::vector<const Json*> scopes_;
  int depth_ = 0;
  int visits_ = 0;
};

}  // namespace

std::string json_schema_grammar(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

}  // namespace strata
