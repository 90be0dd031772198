// The values a Jinja template computes with, as Python (Jinja2's host) sees them: undefined,
// None, bool, int, float, str, list, dict (keys in insertion order), a namespace (the one
// mutable object) and callables (globals, filters' bound methods, macros). Printing, truthiness,
// equality and ordering follow Python, because the oracle is Jinja2 and a template's output must
// match it byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace strata::jinja {

// An error while parsing or rendering, with the template line where one is known (0: none).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int line = 0)
      : std::runtime_error(line > 0 ? "line " + std::to_string(line) + ": " + what : what),
        line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

// raise_exception(message) from the template itself: its message is the template author's.
class RaisedException : public Error {
 public:
  explicit RaisedException(const std::string& message) : Error(message), message_(message) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

class Value;
class Dict;
struct CallArgs;
struct Callable;
struct Lazy;
using List = std::vector<Value>;
using Function = std::function<Value(const CallArgs&)>;

struct Undefined {
  std::string hint;  // why it is undefined ("'x' is undefined"), reported when it is used
};

class Value {
 public:
  enum class Kind {
    Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable, Generator
  };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(nullptr); }
  Value(bool b) : v_(b) {}  // NOLINT: values convert as Python's do
  Value(int64_t i) : v_(i) {}  // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : v_(d) {}  // NOLINT
  Value(std::string s) : v_(std::move(s)) {}  // NOLINT
  Value(const char* s) : v_(std::string(s)) {}  // NOLINT
  Value(List l);      // NOLINT
  Value(Dict d);      // NOLINT
  Value(Callable c);  // NOLINT
  // namespace(...): the attributes a template may assign to (`set ns.x = ...`).
  static Value make_namespace(Dict attributes);
  static Value generator(List items);
  // A Python tuple: a list to everything but printing ("(1, 2)"); dict items and (a, b).
  static Value tuple(List items) {
    Value v(std::move(items));
    v.tuple_ = true;
    return v;
  }
  bool is_tuple() const { return tuple_; }
  // Lists and dicts inside each other, this one included (at most kMaxValueDepth: a list built
  // around itself 60,000 times crashed on tojson, or merely when it was freed).
  int depth() const { return depth_; }

  Kind kind() const;
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_number() const { return kind() == Kind::Int || kind() == Kind::Float; }
  bool is_int() const { return kind() == Kind::Int; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const;  // an int or a float (bools too, as Python's)
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const;  // a dict or a namespace's attributes
  Dict& namespace_attributes() const;
  const Callable& as_callable() const;
  const List& generator_items() const;
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python's bool(x).
  bool truthy() const;
  // Python's str(x), as `{{ x }}` prints it (undefined prints nothing).
  std::string str() const;
  // Python's repr(x), as lists and dicts print their items.
  std::string repr() const;
  // Python's type name ("str", "dict object" style is the caller's).
  std::string type_name() const;

 private:
  explicit Value(std::nullptr_t) : v_(nullptr) {}
  explicit Value(Undefined u) : v_(std::move(u)) {}
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Dict>,
               std::shared_ptr<const Callable>, std::shared_ptr<const Lazy>>
      v_;
  bool tuple_ = false;
  uint16_t depth_ = 0;
};

// A dict keeps its keys in insertion order, as Python's does (tojson and items() show it).
class Dict {
 public:
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::map<std::string, size_t> index_;
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at position i or named `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

struct Callable {
  std::string name;
  Function call;
};

// What select, reject, selectattr, rejectattr and map return in Jinja2: a generator, which
// iterates but has no length, is always true, and is not JSON (templates apply `| list`).
struct Lazy {
  List items;
};

// Value's members that need the types above complete (clang's library checks them eagerly).
// One more than the deepest item; Error past kMaxValueDepth.
uint16_t depth_around_list(const List& items);
uint16_t depth_around_dict(const Dict& items);
inline Value::Value(List l) : depth_(depth_around_list(l)) { v_ = std::make_shared<const List>(std::move(l)); }
inline Value::Value(Dict d) : depth_(depth_around_dict(d)) { v_ = std::make_shared<const Dict>(std::move(d)); }
inline Value::Value(Callable c) : v_(std::make_shared<const Callable>(std::move(c))) {}
inline Dict& Value::namespace_attributes() const { return *std::get<std::shared_ptr<Dict>>(v_); }
inline const Callable& Value::as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
inline const List& Value::generator_items() const { return std::get<std::shared_ptr<const Lazy>>(v_)->items; }

// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, or Error for values Python cannot order.
bool less(const Value& a, const Value& b);

// Python's repr of a float (shortest round trip: 0.1, 1e-05, 1e+20, 3.0, inf, nan).
std::string python_float(double d);

// JSON in (a request's messages and tools) and out (tojson, as Python's json.dumps writes it).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);  // keeps the keys in their order
struct JsonStyle {
  int indent = -1;  // -1: one line
  std::string item_separator = ", ", key_separator = ": ";
  bool sort_keys = false, ensure_ascii = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// UTF-8 text as code points and back (Python indexes strings by code point); an invalid byte
// reads as U+FFFD.
std::u32string code_points(const std::string& s);
std::string utf8(const std::u32string& s);

}  // namespace strata::jinja
