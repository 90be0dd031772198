#include "chat/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "model/unicode.h"

namespace strata::jinja {

const Value* Dict::find(const std::string& key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::set(const std::string& key, Value v) {
  const auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return i < positional.size() ? &positional[i] : nullptr;
}

namespace {

uint16_t one_deeper(int deepest) {
  if (deepest + 1 > kMaxValueDepth)
    throw Error(fmt::format("values nest deeper than {} levels", kMaxValueDepth));
  return static_cast<uint16_t>(deepest + 1);
}

}  // namespace

uint16_t depth_around_list(const List& items) {
  int deepest = 0;
  for (const Value& v : items) deepest = std::max(deepest, v.depth());
  return one_deeper(deepest);
}

uint16_t depth_around_dict(const Dict& items) {
  int deepest = 0;
  for (const auto& kv : items.items()) deepest = std::max(deepest, kv.second.depth());
  return one_deeper(deepest);
}

Value Value::make_namespace(Dict attributes) {
  Value v;
  v.depth_ = depth_around_dict(attributes);
  v.v_ = std::make_shared<Dict>(std::move(attributes));
  return v;
}

Value Value::generator(List items) {
  Value v;
  v.depth_ = depth_around_list(items);
  v.v_ = std::make_shared<const Lazy>(Lazy{std::move(items)});
  return v;
}

Value::Kind Value::kind() const { return static_cast<Kind>(v_.index()); }

double Value::as_float() const {
  switch (kind()) {
    case Kind::Int: return static_cast<double>(as_int());
    case Kind::Float: return std::get<double>(v_);
    case Kind::Bool: return as_bool() ? 1.0 : 0.0;
    default: throw Error("expected a number, got " + type_name());
  }
}

const Dict& Value::as_dict() const {
  if (kind() == Kind::Namespace) return *std::get<std::shared_ptr<Dict>>(v_);
  return *std::get<std::shared_ptr<const Dict>>(v_);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_float() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !as_list().empty();
    case Kind::Dict: return as_dict().size() != 0;
    case Kind::Namespace:
    case Kind::Callable:
    case Kind::Generator: return true;
  }
  return false;
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // [-]d[.ddd]e[+-]xx
  const size_t e_at = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e_at + 1));
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_at; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = negative ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    return out + fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  }
  if (exp10 < 0) return out + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  const auto int_digits = static_cast<size_t>(exp10 + 1);
  if (digits.size() <= int_digits)
    return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

namespace {

// Python's repr of a str: single quotes unless the text has one and no double quote.
std::string string_repr(const std::string& s) {
  const bool double_quoted =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : code_points(s)) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<char32_t>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    else out += utf8(std::u32string(1, c));
  }
  return out + quote;
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  const NestingGuard nested;  // a namespace may hold itself
  charge_steps(1);            // shared lists are printed once per reference
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float(as_float());
    case Kind::String: return string_repr(as_string());
    case Kind::List: {
      std::string out = tuple_ ? "(" : "[";
      for (const auto& item : as_list()) {
        out += (out.size() > 1 ? ", " : "") + item.repr();
        if (out.size() > kMaxText) throw Error("a string longer than the template limit");
      }
      if (tuple_) return out + (as_list().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      for (const auto& [k, v] : as_dict().items()) {
        out += (out.size() > 1 ? ", " : "") + string_repr(k) + ": " + v.repr();
        if (out.size() > kMaxText) throw Error("a string longer than the template limit");
      }
      return out + "}";
    }
    case Kind::Namespace: {
      std::string out = "<Namespace {";
      for (const auto& [k, v] : as_dict().items())
        out += (out.size() > 13 ? ", " : "") + string_repr(k) + ": " + v.repr();
      return out + "}>";
    }
    case Kind::Callable: return "<function " + as_callable().name + ">";
    case Kind::Generator: return "<generator object>";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
    case Kind::Generator: return "generator";
  }
  return "?";
}

namespace {

bool numeric(const Value& v) {
  return v.is_number() || v.kind() == Value::Kind::Bool;
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  const NestingGuard nested;
  charge_steps(1);
  if (numeric(a) && numeric(b)) {
    if (a.kind() != K::Float && b.kind() != K::Float) {
      auto as_i = [](const Value& v) { return v.is_int() ? v.as_int() : int64_t{v.as_bool()}; };
      return as_i(a) == as_i(b);
    }
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const auto &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.namespace_attributes() == &b.namespace_attributes();
    case K::Callable: return &a.as_callable() == &b.as_callable();
    case K::Generator: return &a.generator_items() == &b.generator_items();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  const NestingGuard nested;
  charge_steps(1);
  if (numeric(a) && numeric(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps order
  if (a.kind() == Value::Kind::List && b.kind() == Value::Kind::List) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw Error("'<' not supported between instances of '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

namespace {

template <class Json>
Value value_of_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& item : j) l.push_back(value_of_json(item));
      return Value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), value_of_json(it.value()));
      return Value(std::move(d));
    }
    default: throw Error("a JSON value of an unsupported kind");
  }
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (char32_t c : code_points(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7f && c < 0x10000)) {
          out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
        } else if (ensure_ascii && c >= 0x10000) {
          const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
          out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
        } else {
          out += utf8(std::u32string(1, c));
        }
    }
  }
  return out + "\"";
}

void write_json(const Value& v, const JsonStyle& style, int depth, std::string& out) {
  using K = Value::Kind;
  const NestingGuard nested;  // a namespace may hold itself
  charge_steps(1);            // shared lists are written once per reference
  if (out.size() > kMaxText) throw Error("a string longer than the template limit");
  auto newline = [&](int level) {
    if (style.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(style.indent * level), ' ');
  };
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                                                     : python_float(d);
      return;
    }
    case K::String: out += json_string(v.as_string(), style.ensure_ascii); return;
    case K::List: {
      const auto& l = v.as_list();
      if (l.empty()) { out += "[]"; return; }
      out += "[";
      for (size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += style.item_separator;
        newline(depth + 1);
        write_json(l[i], style, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case K::Dict:
    case K::Namespace: {
      auto items = v.as_dict().items();
      if (items.empty()) { out += "{}"; return; }
      if (style.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        newline(depth + 1);
        out += json_string(items[i].first, style.ensure_ascii) + style.key_separator;
        write_json(items[i].second, style, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    case K::Undefined: throw Error("Object of type Undefined is not JSON serializable");
    case K::Callable: throw Error("Object of type function is not JSON serializable");
    case K::Generator: throw Error("Object of type generator is not JSON serializable");
  }
}

}  // namespace

Value from_json(const nlohmann::json& j) { return value_of_json(j); }
Value from_json(const nlohmann::ordered_json& j) { return value_of_json(j); }

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  write_json(v, style, 0, out);
  return out;
}

std::u32string code_points(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (const Utf8Char& c : split_utf8(s)) out += static_cast<char32_t>(c.codepoint);
  return out;
}

std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) out += encode_utf8(static_cast<uint32_t>(c));
  return out;
}

}  // namespace strata::jinja
