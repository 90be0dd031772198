// Operators, item and attribute access, iteration, and the str and dict methods of Jinja
// values as Hugging Face's chat templates use them (Python's semantics); filters, tests and
// globals are in jinja_filters.cpp.
#include "chat/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtin_support.h"

namespace strata::jinja {

namespace builtin {

const Value& arg_at(const CallArgs& a, size_t i, const std::string& name, const char* fn) {
  const Value* v = a.get(i, name);
  if (!v) throw Error(fmt::format("{}() is missing its argument '{}'", fn, name));
  return *v;
}

const std::string& string_arg(const CallArgs& a, size_t i, const std::string& name,
                              const char* fn) {
  const Value& v = arg_at(a, i, name, fn);
  if (!v.is_string()) type_error(fmt::format("{}() argument '{}' must be str, not {}", fn, name, v.type_name()));
  return v.as_string();
}

List dict_items(const Dict& d) {
  List out;
  for (const auto& [k, v] : d.items()) out.push_back(Value::tuple(List{Value(k), v}));
  return out;
}

}  // namespace builtin

using namespace builtin;

namespace {

Value string_method(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound(name, [s, name](const CallArgs& a) {
      return Value(strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split")
    return bound(name, [s](const CallArgs& a) { return Value(split(s, a.get(0, "sep"), a.get(1, "maxsplit"))); });
  if (name == "startswith" || name == "endswith")
    return bound(name, [s, name](const CallArgs& a) {
      return Value(starts_or_ends(s, arg_at(a, 0, "prefix", name.c_str()), name == "startswith"));
    });
  if (name == "upper") return bound(name, [s](const CallArgs&) { return Value(map_chars(s, to_upper)); });
  if (name == "lower") return bound(name, [s](const CallArgs&) { return Value(map_chars(s, to_lower)); });
  if (name == "title") return bound(name, [s](const CallArgs&) { return Value(title(s)); });
  if (name == "capitalize") return bound(name, [s](const CallArgs&) { return Value(capitalize(s)); });
  if (name == "replace")
    return bound(name, [s](const CallArgs& a) {
      const Value* count = a.get(2, "count");
      return Value(replace(s, string_arg(a, 0, "old", "replace"), string_arg(a, 1, "new", "replace"),
                           count && is_int_like(*count) ? int_of(*count) : -1));
    });
  if (name == "find" || name == "count" || name == "rfind")
    return bound(name, [s, name](const CallArgs& a) {
      const std::string& sub = string_arg(a, 0, "sub", name.c_str());
      if (name == "count") {
        if (sub.empty()) return Value(static_cast<int64_t>(code_points(s).size() + 1));
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
        return Value(n);
      }
      const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
      if (at == std::string::npos) return Value(int64_t{-1});
      return Value(static_cast<int64_t>(code_points(s.substr(0, at)).size()));
    });
  if (name == "join")
    return bound(name, [s](const CallArgs& a) {
      std::string out;
      bool first = true;
      for (const auto& item : iterate(arg_at(a, 0, "iterable", "join"))) {
        if (!item.is_string()) type_error("sequence item: expected str instance, " + item.type_name() + " found");
        if (!first) out += s;
        out += item.as_string();
        first = false;
        check_text(out.size());
      }
      return Value(out);
    });
  if (name == "splitlines")
    return bound(name, [s](const CallArgs&) {
      List out;
      for (std::string& line : split_lines(s)) out.emplace_back(std::move(line));
      return Value(std::move(out));
    });
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" ||
      name == "islower" || name == "isupper")
    return bound(name, [s, name](const CallArgs&) {
      const std::u32string u = code_points(s);
      if (u.empty()) return Value(false);
      bool cased = false;
      for (char32_t c : u) {
        const bool digit = c >= '0' && c <= '9';
        if (name == "isdigit" && !digit) return Value(false);
        if (name == "isspace" && !py_space(c)) return Value(false);
        if (name == "isalpha" && !is_alpha(c)) return Value(false);
        if (name == "isalnum" && !is_alpha(c) && !digit) return Value(false);
        if (name == "islower" && c >= 'A' && c <= 'Z') return Value(false);
        if (name == "isupper" && c >= 'a' && c <= 'z') return Value(false);
        cased = cased || is_alpha(c);
      }
      return Value((name != "islower" && name != "isupper") || cased);
    });
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "items") return bound(name, [obj](const CallArgs&) { return Value(dict_items(obj.as_dict())); });
  if (name == "keys")
    return bound(name, [obj](const CallArgs&) {
      List out;
      for (const auto& kv : obj.as_dict().items()) out.emplace_back(kv.first);
      return Value(std::move(out));
    });
  if (name == "values")
    return bound(name, [obj](const CallArgs&) {
      List out;
      for (const auto& kv : obj.as_dict().items()) out.push_back(kv.second);
      return Value(std::move(out));
    });
  if (name == "get")
    return bound(name, [obj](const CallArgs& a) {
      const Value& key = arg_at(a, 0, "key", "get");
      const Value* dflt = a.get(1, "default");
      const Value* found = key.is_string() ? obj.as_dict().find(key.as_string()) : nullptr;
      return found ? *found : dflt ? *dflt : Value::none();
    });
  return Value();
}

int64_t normalize_index(int64_t i, size_t size) { return i < 0 ? i + static_cast<int64_t>(size) : i; }

// seq * n for a str or a list, its size checked before anything is built (and without
// overflow: n may be 2^63).
Value repeated(const Value& seq, int64_t times) {
  const auto n = static_cast<uint64_t>(std::max<int64_t>(0, times));
  auto times_n = [n](uint64_t size) { return n == 0 || size <= UINT64_MAX / n ? size * n : UINT64_MAX; };
  if (seq.is_string()) {
    if (times_n(seq.as_string().size()) > kMaxText) throw Error("a string longer than the template limit");
    charge_bytes(times_n(seq.as_string().size()));
    std::string s;
    for (uint64_t i = 0; i < n; ++i) s += seq.as_string();
    return Value(std::move(s));
  }
  if (times_n(seq.as_list().size()) > kMaxItems) throw Error("a list longer than the template limit");
  // Each copy copies the strings in it: [a 60 MB string] * 1000 asked for 60 GB.
  charge_steps(times_n(seq.as_list().size()));
  charge_bytes(times_n(built_bytes(seq)));
  List l;
  for (uint64_t i = 0; i < n; ++i) l.insert(l.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(l));
}

// base ** e for e >= 0 by squaring: 1 ** (2**63 - 1) is 63 steps, not 2**63.
int64_t int_power(int64_t base, int64_t e) {
  int64_t r = 1;
  for (; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) throw Error("integer overflow");
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
      if (r == 0) break;  // 0 times anything
      throw Error("integer overflow");
    }
  }
  return r;
}

// Python's // (quotient) or % (remainder): rounded toward negative infinity, b nonzero.
Value floor_division(const Value& a, const Value& b, bool ints, bool quotient) {
  if (ints) {
    const int64_t x = int_of(a), y = int_of(b);
    if (x == INT64_MIN && y == -1) throw Error("integer overflow");
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return quotient ? Value(q) : Value(r);
  }
  const double x = a.as_float(), y = b.as_float();
  if (quotient) return Value(std::floor(x / y));
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value(r);
}

}  // namespace

void require_defined(const Value& v) {
  if (v.is_undefined())
    throw Error(v.undefined_hint().empty() ? "a value is undefined" : v.undefined_hint());
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    const std::string x = a.str(), y = b.str();
    check_text(x.size() + y.size());
    charge_bytes(x.size() + y.size());
    return Value(x + y);
  }
  require_defined(a);
  require_defined(b);
  auto unsupported = [&]() -> Value {
    type_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
  };
  const bool ints = is_int_like(a) && is_int_like(b);
  const bool nums = (a.is_number() || a.kind() == K::Bool) && (b.is_number() || b.kind() == K::Bool);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(int_of(a), int_of(b), &r)) throw Error("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_text(a.as_string().size() + b.as_string().size());
      charge_bytes(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.kind() == K::List && b.kind() == K::List) {
      if (a.as_list().size() + b.as_list().size() > kMaxItems) throw Error("a list longer than the template limit");
      charge_steps(a.as_list().size() + b.as_list().size());
      charge_bytes(built_bytes(a) + built_bytes(b));
      List l = a.as_list();
      l.insert(l.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(l));
    }
    if (a.is_string() || b.is_string())
      type_error(fmt::format("can only concatenate str (not \"{}\") to str", a.is_string() ? b.type_name() : a.type_name()));
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(int_of(a), int_of(b), &r)) throw Error("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() - b.as_float());
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(int_of(a), int_of(b), &r)) throw Error("integer overflow");
      return Value(r);
    }
    if (nums) return Value(a.as_float() * b.as_float());
    const Value& seq = is_int_like(a) ? b : a;
    const Value& times = is_int_like(a) ? a : b;
    if (!is_int_like(times) || !(seq.is_string() || seq.kind() == K::List)) return unsupported();
    return repeated(seq, int_of(times));
  }
  if (op == "/") {
    if (!nums) return unsupported();
    if (b.as_float() == 0) throw Error("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (!nums) {
      if (op == "%" && a.is_string()) throw Error("printf-style string formatting ('%') is not supported");
      return unsupported();
    }
    if (b.as_float() == 0) throw Error(op == "%" ? "modulo by zero" : "division by zero");
    return floor_division(a, b, ints, op == "//");
  }
  if (op == "**") {
    if (ints && int_of(b) >= 0) return Value(int_power(int_of(a), int_of(b)));
    if (nums) return Value(std::pow(a.as_float(), b.as_float()));
    return unsupported();
  }
  throw Error("unknown operator " + op);
}

bool contains(const Value& container, const Value& item) {
  charge_steps(work_units(container));
  switch (container.kind()) {
    case K::String:
      if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case K::List:
    case K::Generator:
      for (const auto& v : iterate(container))
        if (equal(v, item)) return true;
      return false;
    case K::Dict:
    case K::Namespace:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case K::Undefined: require_defined(container); return false;
    default: type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  switch (obj.kind()) {
    case K::List:
      if (is_int_like(key)) {
        const auto& l = obj.as_list();
        const int64_t i = normalize_index(int_of(key), l.size());
        if (i >= 0 && i < static_cast<int64_t>(l.size())) return l[static_cast<size_t>(i)];
      }
      break;
    case K::String:
      if (is_int_like(key)) {
        const std::u32string u = code_points(obj.as_string());
        const int64_t i = normalize_index(int_of(key), u.size());
        if (i >= 0 && i < static_cast<int64_t>(u.size())) return Value(utf8(u.substr(static_cast<size_t>(i), 1)));
      }
      break;
    case K::Dict:
    case K::Namespace:
      if (key.is_string()) {
        if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
        if (obj.kind() == K::Dict) {
          Value m = dict_method(obj, key.as_string());
          if (!m.is_undefined()) return m;
        }
      }
      break;
    default: break;
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined(fmt::format("'{} object' has no element {}", obj.type_name(), key.repr()));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  require_defined(obj);
  charge_steps(work_units(obj));
  auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_int_like(v)) type_error(std::string("slice ") + what + " must be an integer or None");
    return int_of(v);
  };
  const int64_t step = opt(step_v, "step").value_or(1);
  if (step == 0) throw Error("slice step cannot be zero");
  auto indices = [&](size_t size) {
    const auto n = static_cast<int64_t>(size);
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t i = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = clamp(opt(start_v, "start"), step > 0 ? 0 : n - 1);
    const int64_t e = clamp(opt(stop_v, "stop"), step > 0 ? n : -1);
    std::vector<size_t> out;
    for (int64_t i = b; step > 0 ? i < e : i > e;) {
      out.push_back(static_cast<size_t>(i));
      if (__builtin_add_overflow(i, step, &i)) break;  // past either end
    }
    return out;
  };
  if (obj.kind() == K::List) {
    List out;
    for (size_t i : indices(obj.as_list().size())) out.push_back(obj.as_list()[i]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    const std::u32string u = code_points(obj.as_string());
    std::u32string out;
    for (size_t i : indices(u.size())) out += u[i];
    return Value(utf8(out));
  }
  type_error("'" + obj.type_name() + "' object is not subscriptable");
}

Value get_attribute(const Value& obj, const std::string& name) {
  require_defined(obj);
  charge_steps(work_units(obj));  // a str method copies the string; a dict's is looked up
  switch (obj.kind()) {
    case K::String: return string_method(obj.as_string(), name);
    case K::Dict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case K::Namespace:
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return Value::undefined("'Namespace' object has no attribute '" + name + "'");
    case K::List:
      if (name == "index" || name == "count")
        return bound(name, [obj, name](const CallArgs& a) {
          const Value& x = arg_at(a, 0, "value", name.c_str());
          int64_t n = 0;
          const auto& l = obj.as_list();
          for (size_t i = 0; i < l.size(); ++i) {
            if (!equal(l[i], x)) continue;
            if (name == "index") return Value(static_cast<int64_t>(i));
            ++n;
          }
          if (name == "index") throw Error(x.repr() + " is not in list");
          return Value(n);
        });
      break;
    default: break;
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
}

List iterate(const Value& v) {
  charge_steps(work_units(v));
  charge_bytes(built_bytes(v));  // the items are copied (their strings with them)
  switch (v.kind()) {
    case K::Undefined: return {};
    case K::List: return v.as_list();
    case K::Generator: return v.generator_items();
    case K::Dict:
    case K::Namespace: {
      List out;
      for (const auto& kv : v.as_dict().items()) out.emplace_back(kv.first);
      return out;
    }
    case K::String: {
      const std::u32string u = code_points(v.as_string());
      check_items(u.size());  // a list of one-character strings: 56 bytes a character
      List out;
      for (char32_t c : u) out.emplace_back(utf8(std::u32string(1, c)));
      return out;
    }
    default: type_error("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace strata::jinja
