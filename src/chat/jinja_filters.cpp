// Jinja's filters, tests and global functions as Hugging Face's chat templates use them
// (Python's semantics, bounded output).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtin_support.h"

namespace strata::jinja {

using namespace builtin;

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
  // A trailing line break keeps its (empty) last line, as Jinja's indent does.
  const std::vector<std::string> lines = split_lines(text + "\n");
  // Its size before it is built (a long pad on many lines asked for 2 GB).
  const uint64_t pads = lines.size() + 1;
  if (!pad.empty() && pads > (kMaxText - std::min<uint64_t>(text.size(), kMaxText)) / pad.size())
    throw Error("a string longer than the template limit");
  charge_bytes(text.size() + pads * pad.size());
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

namespace {

// The filters of one value as text: default, length, string, trim, case, tojson, escape, replace, join.
std::optional<Value> text_filter(const std::string& name, const Value& v, const CallArgs& a) {
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
  return std::nullopt;
}

// The filters over a sequence or mapping: first/last, list, items, sorting, unique, select and reject, map, attr.
std::optional<Value> sequence_filter(const std::string& name, const Value& v, const CallArgs& a) {
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
        charge_steps(1);  // quadratic: range(1000000)|unique ran for an hour
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
  return std::nullopt;
}

// The filters to and of numbers, and the rest: int, float, abs, round, indent, sum, min/max, wordcount.
std::optional<Value> number_filter(const std::string& name, const Value& v, const CallArgs& a) {
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
  return std::nullopt;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  charge_steps(work_units(v));  // a filter reads its operand (sorts and unique: per comparison)
  for (auto* filter : {text_filter, sequence_filter, number_filter})
    if (std::optional<Value> out = filter(name, v, a)) {
      charge_bytes(built_bytes(*out));
      return std::move(*out);
    }
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
          for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
            if (out.size() >= kMaxItems) throw Error("range too large");
            if (out.size() % 4096 == 0) check_items(out.size() + 4096);  // before, not after
            out.emplace_back(i);
            if (__builtin_add_overflow(i, step, &i)) break;  // past int64: Python's range ends too
          }
          charge_steps(out.size());
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
