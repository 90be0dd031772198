#include "chat/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>

namespace strata::jinja {

namespace {

using K = Value::Kind;

[[noreturn]] void type_error(const std::string& what) { throw Error(what); }

bool is_int_like(const Value& v) { return v.is_int() || v.kind() == K::Bool; }
int64_t int_of(const Value& v) { return v.is_int() ? v.as_int() : int64_t{v.as_bool()}; }

void check_text(size_t bytes) {
  if (bytes > kMaxText) throw Error("a string longer than the template limit");
}

// Python's string whitespace (ASCII and the common Unicode spaces).
bool py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = code_points(s);
  std::u32string set;
  const bool by_set = chars && !chars->is_none() && !chars->is_undefined();
  if (by_set) {
    if (!chars->is_string()) type_error("strip arg must be None or str");
    set = code_points(chars->as_string());
  }
  auto drop = [&](char32_t c) { return by_set ? set.find(c) != std::u32string::npos : py_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return utf8(u.substr(b, e - b));
}

List split(const std::string& s, const Value* sep, const Value* maxsplit_v) {
  int64_t maxsplit = maxsplit_v && is_int_like(*maxsplit_v) ? int_of(*maxsplit_v) : -1;
  List out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty pieces
    const std::u32string u = code_points(s);
    size_t i = 0;
    while (true) {
      while (i < u.size() && py_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit == 0) {
        size_t e = u.size();
        while (e > i && py_space(u[e - 1])) --e;
        out.emplace_back(utf8(u.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !py_space(u[j])) ++j;
      out.emplace_back(utf8(u.substr(i, j - i)));
      --maxsplit;
      i = j;
    }
    return out;
  }
  if (!sep->is_string()) type_error("must be str or None, not " + sep->type_name());
  const std::string& d = sep->as_string();
  if (d.empty()) throw Error("empty separator");
  size_t from = 0;
  while (maxsplit != 0) {
    const size_t at = s.find(d, from);
    if (at == std::string::npos) break;
    out.emplace_back(s.substr(from, at - from));
    from = at + d.size();
    --maxsplit;
  }
  out.emplace_back(s.substr(from));
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between every character
    const std::u32string u = code_points(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || static_cast<int64_t>(i) < count) out += with;
      if (i < u.size()) out += utf8(std::u32string(1, u[i]));
      check_text(out.size());
    }
    return out;
  }
  size_t from = 0;
  while (count != 0) {
    const size_t at = s.find(old, from);
    if (at == std::string::npos) break;
    out += s.substr(from, at - from) + with;
    check_text(out.size());
    from = at + old.size();
    --count;
  }
  return out + s.substr(from);
}

char32_t to_upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t to_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool is_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = code_points(s);
  for (auto& c : u) c = f(c);
  return utf8(u);
}

std::string capitalize(const std::string& s) {
  std::u32string u = code_points(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return utf8(u);
}

std::string title(const std::string& s) {
  std::u32string u = code_points(s);
  bool prev_cased = false;
  for (auto& c : u) {
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = is_alpha(c);
  }
  return utf8(u);
}

bool starts_or_ends(const std::string& s, const Value& arg, bool start) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) type_error("startswith/endswith takes a str or a tuple of str");
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.kind() == K::List) {
    for (const auto& p : arg.as_list())
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

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

Value bound(std::string name, Function f) { return Value(Callable{std::move(name), std::move(f)}); }

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
      std::string cur;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.emplace_back(cur);
          cur.clear();
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        } else {
          cur += s[i];
        }
      }
      if (!cur.empty()) out.emplace_back(cur);
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

List dict_items(const Dict& d) {
  List out;
  for (const auto& [k, v] : d.items()) out.push_back(Value::tuple(List{Value(k), v}));
  return out;
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

}  // namespace

void require_defined(const Value& v) {
  if (v.is_undefined())
    throw Error(v.undefined_hint().empty() ? "a value is undefined" : v.undefined_hint());
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.str() + b.str();
    check_text(s.size());
    return Value(std::move(s));
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
      return Value(a.as_string() + b.as_string());
    }
    if (a.kind() == K::List && b.kind() == K::List) {
      if (a.as_list().size() + b.as_list().size() > kMaxItems) throw Error("a list longer than the template limit");
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
    if (!is_int_like(times)) return unsupported();
    const int64_t n = std::max<int64_t>(0, int_of(times));
    if (seq.is_string()) {
      if (seq.as_string().size() * static_cast<uint64_t>(n) > kMaxText) throw Error("a string longer than the template limit");
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += seq.as_string();
      return Value(std::move(s));
    }
    if (seq.kind() == K::List) {
      if (seq.as_list().size() * static_cast<uint64_t>(n) > kMaxItems) throw Error("a list longer than the template limit");
      List l;
      for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq.as_list().begin(), seq.as_list().end());
      return Value(std::move(l));
    }
    return unsupported();
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
    if (ints) {
      const int64_t x = int_of(a), y = int_of(b);
      if (x == INT64_MIN && y == -1) throw Error("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    const double x = a.as_float(), y = b.as_float();
    const double q = std::floor(x / y);
    if (op == "//") return Value(q);
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  if (op == "**") {
    if (ints && int_of(b) >= 0) {
      int64_t r = 1, base = int_of(a);
      for (int64_t e = int_of(b); e > 0; --e)
        if (__builtin_mul_overflow(r, base, &r)) throw Error("integer overflow");
      return Value(r);
    }
    if (nums) return Value(std::pow(a.as_float(), b.as_float()));
    return unsupported();
  }
  throw Error("unknown operator " + op);
}

bool contains(const Value& container, const Value& item) {
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
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<size_t>(i));
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
      List out;
      for (char32_t c : code_points(v.as_string())) out.emplace_back(utf8(std::u32string(1, c)));
      return out;
    }
    default: type_error("'" + v.type_name() + "' object is not iterable");
  }
}

namespace {

size_t length(const Value& v) {
  switch (v.kind()) {
    case K::Undefined: return 0;
    case K::String: return code_points(v.as_string()).size();
    case K::List: return v.as_list().size();
    case K::Dict:
    case K::Namespace: return v.as_dict().size();
    default: type_error("object of type '" + v.type_name() + "' has no len()");
  }
}

// Python's int(x) of a float, within int64 (Python's ints are unbounded; a template's are not).
int64_t truncate(double x) {
  if (!std::isfinite(x) || x >= 9.2e18 || x <= -9.2e18) throw Error("integer overflow");
  return static_cast<int64_t>(x);
}

// Positional arguments from `from` on, as a new CallArgs (select's and selectattr's test args).
CallArgs rest(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.keyword = a.keyword;
  return r;
}

Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    const bool number = digits && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
    cur = number ? get_item(cur, Value(index)) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

Value select(const Value& v, const CallArgs& a, bool by_attribute, bool keep) {
  List out;
  if (!v.truthy()) return Value::generator(std::move(out));  // Jinja2: `if value:` first
  const size_t test_at = by_attribute ? 1 : 0;
  const std::string attr = by_attribute ? string_arg(a, 0, "attribute", "selectattr") : "";
  const Value* test = a.positional.size() > test_at ? &a.positional[test_at] : nullptr;
  if (test && !test->is_string()) type_error("a test name must be a string");
  const CallArgs test_args = rest(a, test_at + 1);
  for (const auto& item : iterate(v)) {
    const Value x = by_attribute ? attribute_path(item, attr) : item;
    const bool pass = test ? apply_test(test->as_string(), x, test_args) : x.truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string indent(const std::string& text, const Value* width_v, bool first, bool blank) {
  std::string pad = "    ";
  if (width_v) {
    if (width_v->is_string()) pad = width_v->as_string();
    else if (is_int_like(*width_v)) pad = std::string(static_cast<size_t>(std::clamp<int64_t>(int_of(*width_v), 0, 4096)), ' ');
  }
  std::vector<std::string> lines;
  std::string cur;
  const std::string s = text + "\n";
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
  }
  check_text(rv.size());
  return first ? pad + rv : rv;
}

bool flag(const CallArgs& a, size_t i, const std::string& name) {
  const Value* v = a.get(i, name);
  return v && v->truthy();
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
std::string tojson(const Value& v, const CallArgs& a) {
  JsonStyle style;
  if (const Value* ind = a.get(0, "indent"); ind && !ind->is_none()) {
    if (!is_int_like(*ind)) type_error("tojson indent must be an integer");
    style.indent = static_cast<int>(std::clamp<int64_t>(int_of(*ind), 0, 64));
    style.item_separator = ",";
  }
  style.ensure_ascii = flag(a, 1, "ensure_ascii");
  if (const Value* sep = a.get(2, "separators"); sep && !sep->is_none()) {
    if (sep->kind() != K::List || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string())
      type_error("tojson separators must be a pair of strings");
    style.item_separator = sep->as_list()[0].as_string();
    style.key_separator = sep->as_list()[1].as_string();
  }
  style.sort_keys = flag(a, 3, "sort_keys");
  std::string out = to_json(v, style);
  check_text(out.size());
  return out;
}

Value sorted(const Value& v, const CallArgs& a) {
  List l = iterate(v);
  const bool reverse = flag(a, 0, "reverse");
  const bool case_sensitive = flag(a, 1, "case_sensitive");
  const Value* attr = a.get(2, "attribute");
  auto key = [&](const Value& x) {
    Value k = attr && attr->is_string() ? attribute_path(x, attr->as_string()) : x;
    if (!case_sensitive && k.is_string()) return Value(map_chars(k.as_string(), to_lower));
    return k;
  };
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value(std::move(l));
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "default" || name == "d") {
    const Value* dflt = a.get(0, "default_value");
    const bool boolean = flag(a, 1, "boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt ? *dflt : Value("");
    return v;
  }
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(length(v)));
  if (name == "string") return Value(v.str());
  if (name == "safe") return v;
  if (name == "trim") {
    if (!v.is_string()) return Value(strip(v.str(), a.get(0, "chars"), true, true));
    return Value(strip(v.as_string(), a.get(0, "chars"), true, true));
  }
  if (name == "upper") return Value(map_chars(v.str(), to_upper));
  if (name == "lower") return Value(map_chars(v.str(), to_lower));
  if (name == "capitalize") return Value(capitalize(v.str()));
  if (name == "title") return Value(title(v.str()));
  if (name == "tojson") return Value(tojson(v, a));
  if (name == "escape" || name == "e") return Value(html_escape(v.str()));
  if (name == "replace") {
    const Value* count = a.get(2, "count");
    return Value(replace(v.str(), string_arg(a, 0, "old", "replace"), string_arg(a, 1, "new", "replace"),
                         count && is_int_like(*count) ? int_of(*count) : -1));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first) out += sep ? sep->str() : "";
      out += (attr && attr->is_string() ? attribute_path(item, attr->as_string()) : item).str();
      first = false;
      check_text(out.size());
    }
    return Value(out);
  }
  if (name == "first" || name == "last") {
    if (name == "last" && v.kind() == K::Generator) type_error("'generator' object is not reversible");
    const List l = iterate(v);
    if (l.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? l.front() : l.back();
  }
  if (name == "list") return Value(iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (v.kind() != K::Dict && v.kind() != K::Namespace) type_error("items() of a " + v.type_name());
    return Value(dict_items(v.as_dict()));
  }
  if (name == "dictsort") {
    if (v.kind() != K::Dict) type_error("dictsort of a " + v.type_name());
    List l = dict_items(v.as_dict());
    const bool case_sensitive = flag(a, 0, "case_sensitive");
    const Value* by = a.get(1, "by");
    const size_t at = by && by->is_string() && by->as_string() == "value" ? 1 : 0;
    const bool reverse = flag(a, 2, "reverse");
    auto key = [&](const Value& kv) {
      Value k = kv.as_list()[at];
      if (!case_sensitive && k.is_string()) return Value(map_chars(k.as_string(), to_lower));
      return k;
    };
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
      return reverse ? less(key(y), key(x)) : less(key(x), key(y));
    });
    return Value(std::move(l));
  }
  if (name == "sort") return sorted(v, a);
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = code_points(v.as_string());
      std::reverse(u.begin(), u.end());
      return Value(utf8(u));
    }
    List l = iterate(v);
    std::reverse(l.begin(), l.end());
    return Value(std::move(l));
  }
  if (name == "unique") {
    List out;
    for (const auto& item : iterate(v)) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& o) {
        if (o.is_string() && item.is_string())
          return map_chars(o.as_string(), to_lower) == map_chars(item.as_string(), to_lower);
        return equal(o, item);
      });
      if (!seen) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (name == "select" || name == "reject") return select(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr");
  if (name == "map") {
    List out;
    if (!v.truthy()) return Value::generator(std::move(out));
    const Value* attr = a.get(99, "attribute");
    if (attr) {
      const Value* dflt = a.get(99, "default");
      for (const auto& item : iterate(v)) {
        Value x = attribute_path(item, attr->str());
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
      return Value::generator(std::move(out));
    }
    const std::string& filter = string_arg(a, 0, "filter", "map");
    const CallArgs filter_args = rest(a, 1);
    for (const auto& item : iterate(v)) out.push_back(apply_filter(filter, item, filter_args));
    return Value::generator(std::move(out));
  }
  if (name == "attr") return get_attribute(v, string_arg(a, 0, "name", "attr"));
  if (name == "int") {
    const Value* dflt = a.get(0, "default");
    if (is_int_like(v)) return Value(int_of(v));
    if (v.kind() == K::Float) return Value(truncate(v.as_float()));
    if (v.is_string()) {
      try {
        size_t used = 0;
        const std::string t = strip(v.as_string(), nullptr, true, true);
        const int64_t i = std::stoll(t, &used);
        if (used == t.size()) return Value(i);
        return Value(truncate(std::stod(t)));
      } catch (const std::exception&) {
      }
    }
    return dflt ? *dflt : Value(int64_t{0});
  }
  if (name == "float") {
    const Value* dflt = a.get(0, "default");
    if (v.is_number() || v.kind() == K::Bool) return Value(v.as_float());
    if (v.is_string()) {
      try {
        return Value(std::stod(v.as_string()));
      } catch (const std::exception&) {
      }
    }
    return dflt ? *dflt : Value(0.0);
  }
  if (name == "abs") {
    if (is_int_like(v)) return Value(std::abs(int_of(v)));
    return Value(std::fabs(v.as_float()));
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const int64_t digits = p && is_int_like(*p) ? std::clamp<int64_t>(int_of(*p), -300, 300) : 0;
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value(std::nearbyint(v.as_float() * scale) / scale);
  }
  if (name == "indent")
    return Value(indent(v.str(), a.get(0, "width"), flag(a, 1, "first"), flag(a, 2, "blank")));
  if (name == "sum") {
    Value total = a.get(1, "start") ? *a.get(1, "start") : Value(int64_t{0});
    const Value* attr = a.get(0, "attribute");
    for (const auto& item : iterate(v))
      total = binary_op("+", total, attr && attr->is_string() ? attribute_path(item, attr->as_string()) : item);
    return total;
  }
  if (name == "min" || name == "max") {
    const List l = iterate(v);
    if (l.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    Value best = l[0];
    for (const auto& x : l)
      if (name == "min" ? less(x, best) : less(best, x)) best = x;
    return best;
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(split(v.str(), nullptr, nullptr).size()));
  throw Error("unknown filter '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  auto other = [&]() -> const Value& { return arg_at(a, 0, "other", name.c_str()); };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::Bool;
  if (name == "true") return v.kind() == K::Bool && v.as_bool();
  if (name == "false") return v.kind() == K::Bool && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.kind() == K::Float;
  if (name == "number") return v.is_number() || v.kind() == K::Bool;
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.kind() == K::Dict;
  if (name == "iterable" || name == "sequence")
    return v.is_string() || v.kind() == K::List || v.kind() == K::Dict || v.kind() == K::Namespace;
  if (name == "callable") return v.kind() == K::Callable;
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    require_defined(v);
    if (!is_int_like(v)) type_error("odd/even of a " + v.type_name());
    return (int_of(v) % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& n = other();
    if (!is_int_like(v) || !is_int_like(n) || int_of(n) == 0) type_error("divisibleby needs nonzero integers");
    return int_of(v) % int_of(n) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, other());
  if (name == "ne" || name == "!=") return !equal(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
  if (name == "le" || name == "<=") return !less(other(), v);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
  if (name == "ge" || name == ">=") return !less(v, other());
  if (name == "in") return contains(arg_at(a, 0, "seq", "in"), v);
  if (name == "sameas") {
    const Value& o = other();
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind() == K::Bool) return v.as_bool() == o.as_bool();
    return false;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string s = v.as_string();
    return s == map_chars(s, name == "lower" ? to_lower : to_upper);
  }
  throw Error("unknown test '" + name + "'");
}

bool is_filter(const std::string& name) {
  static const char* const names[] = {
      "default", "d", "length", "count", "string", "safe", "trim", "upper", "lower",
      "capitalize", "title", "tojson", "escape", "e", "replace", "join", "first", "last",
      "list", "items", "dictsort", "sort", "reverse", "unique", "select", "reject",
      "selectattr", "rejectattr", "map", "attr", "int", "float", "abs", "round", "indent",
      "sum", "min", "max", "wordcount"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool is_test(const std::string& name) {
  static const char* const names[] = {
      "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
      "string", "mapping", "iterable", "sequence", "callable", "escaped", "odd", "even",
      "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
      "greaterthan", ">", "ge", ">=", "in", "sameas", "lower", "upper"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Dict global_functions() {
  Dict g;
  g.set("range", bound("range", [](const CallArgs& a) {
          std::vector<int64_t> p;
          for (const auto& v : a.positional) {
            if (!is_int_like(v)) type_error("range() takes integers, not " + v.type_name());
            p.push_back(int_of(v));
          }
          if (p.empty() || p.size() > 3) type_error("range expected 1 to 3 arguments");
          const int64_t start = p.size() > 1 ? p[0] : 0, stop = p.size() > 1 ? p[1] : p[0];
          const int64_t step = p.size() > 2 ? p[2] : 1;
          if (step == 0) throw Error("range() arg 3 must not be zero");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= kMaxItems) throw Error("range too large");
            out.emplace_back(i);
          }
          return Value(std::move(out));
        }));
  auto dict_of = [](const CallArgs& a) {
    Dict d;
    for (const auto& v : a.positional) {
      if (v.kind() != K::Dict) type_error("namespace()/dict() takes keyword arguments or a dict");
      for (const auto& [k, x] : v.as_dict().items()) d.set(k, x);
    }
    for (const auto& [k, x] : a.keyword) d.set(k, x);
    return d;
  };
  g.set("namespace", bound("namespace", [dict_of](const CallArgs& a) { return Value::make_namespace(dict_of(a)); }));
  g.set("dict", bound("dict", [dict_of](const CallArgs& a) { return Value(dict_of(a)); }));
  g.set("raise_exception", bound("raise_exception", [](const CallArgs& a) -> Value {
          const Value* m = a.get(0, "message");
          throw RaisedException(m ? m->str() : "");
        }));
  g.set("strftime_now", bound("strftime_now", [](const CallArgs& a) {
          const std::string& format = string_arg(a, 0, "format", "strftime_now");
          const std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[256];
          const size_t n = format.size() < 128 ? std::strftime(buf, sizeof buf, format.c_str(), &tm) : 0;
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace strata::jinja
