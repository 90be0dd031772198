#include "chat/schema_combine.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace strata {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxNeverBothDepth = 8;  // property schemas compared inside property schemas

[[noreturn]] void refuse_all_of(const std::string& why) {
  throw SchemaError("allOf", fmt::format("the JSON schema's 'allOf' {}", why));
}

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {"title", "description", "default", "examples",
                                                     "$schema", "$id", "$comment", "strict"};
  return kAnnotations.count(k) > 0;
}

std::set<std::string> type_set(const Json& t) {
  std::set<std::string> out;
  if (t.is_string()) out.insert(t.get<std::string>());
  if (t.is_array())
    for (const auto& v : t)
      if (v.is_string()) out.insert(v.get<std::string>());
  return out;
}

// Types a value of both sets has: integer is a number.
std::set<std::string> common_types(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const auto& x : a)
    for (const auto& y : b) {
      if (x == y) out.insert(x);
      else if ((x == "integer" && y == "number") || (x == "number" && y == "integer")) out.insert("integer");
    }
  return out;
}

// additionalProperties false in a merged branch: only the names it lists may stay.
void close_to(Json& merged, const Json& branch) {
  if (!branch.contains("additionalProperties") || branch["additionalProperties"] != Json(false)) return;
  if (!merged.contains("properties") || !merged["properties"].is_object()) return;
  const Json listed = branch.value("properties", Json::object());
  Json kept = Json::object();
  for (auto it = merged["properties"].begin(); it != merged["properties"].end(); ++it) {
    if (listed.is_object() && listed.contains(it.key())) {
      kept[it.key()] = it.value();
      continue;
    }
    if (merged.contains("required") && merged["required"].is_array())
      for (const auto& r : merged["required"])
        if (r == Json(it.key()))
          refuse_all_of(fmt::format("requires '{}', which another branch's additionalProperties false forbids", it.key()));
  }
  merged["properties"] = kept;
}

void merge_keyword(Json& into, const std::string& k, const Json& v) {
  Json& old = into[k];
  if (k == "properties" && old.is_object() && v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (old.contains(it.key()) && old[it.key()] != it.value())
        old[it.key()] = Json{{"allOf", Json::array({old[it.key()], it.value()})}};
      else
        old[it.key()] = it.value();
    }
  } else if (k == "required" && old.is_array() && v.is_array()) {
    for (const auto& r : v)
      if (std::find(old.begin(), old.end(), r) == old.end()) old.push_back(r);
  } else if (k == "type") {
    const auto both = common_types(type_set(old), type_set(v));
    if (both.empty()) refuse_all_of("has branches whose types no value has at once");
    old = both.size() == 1 ? Json(*both.begin()) : Json(std::vector<std::string>(both.begin(), both.end()));
  } else if ((k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems") &&
             old.is_number() && v.is_number()) {
    if (v > old) old = v;
  } else if ((k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems") &&
             old.is_number() && v.is_number()) {
    if (v < old) old = v;
  } else if (k == "additionalProperties") {
    if (old == Json(false) || v == Json(false)) old = false;
    else if (old == Json(true)) old = v;
    else if (v != Json(true)) old = Json{{"allOf", Json::array({old, v})}};
  } else if (k == "items") {
    old = Json{{"allOf", Json::array({old, v})}};
  } else {
    refuse_all_of(fmt::format("has branches that set '{}' differently", k));
  }
}

std::optional<std::vector<Json>> values_of(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  return std::nullopt;
}

std::string json_type(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  const double d = v.get<double>();
  return d == static_cast<double>(static_cast<int64_t>(d)) ? "integer" : "number";
}

std::optional<std::set<std::string>> types_of(const Json& s) {
  if (s.contains("type")) return type_set(s["type"]);
  if (const auto values = values_of(s)) {
    std::set<std::string> out;
    for (const auto& v : *values) out.insert(json_type(v));
    return out;
  }
  return std::nullopt;
}

std::set<std::string> required_of(const Json& s) {
  std::set<std::string> out;
  if (s.contains("required") && s["required"].is_array())
    for (const auto& r : s["required"])
      if (r.is_string()) out.insert(r.get<std::string>());
  return out;
}

// `s` requires a key that `other` closes off.
bool requires_what_other_forbids(const Json& s, const Json& other) {
  if (!other.contains("additionalProperties") || other["additionalProperties"] != Json(false)) return false;
  const Json listed = other.value("properties", Json::object());
  for (const auto& r : required_of(s))
    if (!listed.is_object() || !listed.contains(r)) return true;
  return false;
}

bool never_both_at(const Json& a, const Json& b, const SchemaResolver& resolve, int depth) {
  if (depth > kMaxNeverBothDepth) return false;
  const Json& x = resolve(a);
  const Json& y = resolve(b);
  if (x == Json(false) || y == Json(false)) return true;
  if (!x.is_object() || !y.is_object()) return false;
  const auto vx = values_of(x), vy = values_of(y);
  if (vx && vy) {
    for (const auto& p : *vx)
      if (std::find(vy->begin(), vy->end(), p) != vy->end()) return false;
    return true;
  }
  const auto tx = types_of(x), ty = types_of(y);
  if (tx && ty && common_types(*tx, *ty).empty()) return true;
  if (requires_what_other_forbids(x, y) || requires_what_other_forbids(y, x)) return true;
  const Json px = x.value("properties", Json::object()), py = y.value("properties", Json::object());
  if (!px.is_object() || !py.is_object()) return false;
  const auto ry = required_of(y);
  for (const auto& r : required_of(x))
    if (ry.count(r) && px.contains(r) && py.contains(r) && never_both_at(px[r], py[r], resolve, depth + 1))
      return true;
  return false;
}

}  // namespace

namespace {

constexpr int kMaxAllOfDepth = 32;     // allOf inside allOf, through $ref (a cycle is refused)
constexpr int kMaxAllOfParts = 4096;   // branches merged in all: two at each of 32 levels is 2^32

Json merge_all_of_at(const Json& schema, const SchemaResolver& resolve, int depth, int& parts_left) {
  if (depth > kMaxAllOfDepth) refuse_all_of(fmt::format("nests deeper than {} levels", kMaxAllOfDepth));
  const Json& branches = schema["allOf"];
  if (!branches.is_array() || branches.empty()) refuse_all_of("must be a non-empty array");
  Json merged = schema;
  merged.erase("allOf");
  std::vector<Json> parts{merged};
  for (const auto& b : branches) {
    if (--parts_left < 0) refuse_all_of(fmt::format("merges more than {} branches in all", kMaxAllOfParts));
    Json part = resolve(b);
    if (part == Json(false)) refuse_all_of("has a branch that accepts nothing");
    if (part == Json(true)) continue;
    if (!part.is_object()) refuse_all_of("has a branch that is not a schema");
    part.erase("$defs");  // resolved where they are: the merged copy keeps the root's
    part.erase("definitions");
    if (part.contains("allOf")) part = merge_all_of_at(part, resolve, depth + 1, parts_left);
    for (auto it = part.begin(); it != part.end(); ++it) {
      if (is_annotation(it.key()) && merged.contains(it.key())) continue;
      if (!merged.contains(it.key())) merged[it.key()] = it.value();
      else if (merged[it.key()] != it.value()) merge_keyword(merged, it.key(), it.value());
    }
    parts.push_back(part);
  }
  for (const auto& p : parts) close_to(merged, p);
  return merged;
}

}  // namespace

Json merge_all_of(const Json& schema, const SchemaResolver& resolve) {
  int parts_left = kMaxAllOfParts;
  return merge_all_of_at(schema, resolve, 0, parts_left);
}

bool never_both(const Json& a, const Json& b, const SchemaResolver& resolve) {
  return never_both_at(a, b, resolve, 0);
}

}  // namespace strata
