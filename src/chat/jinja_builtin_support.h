// What the Jinja builtins share: jinja_builtins.cpp (operators, item access, str and dict
// methods) and jinja_filters.cpp (filters, tests, globals). Errors and a call's arguments here;
// Python's str operations in jinja_text.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"

namespace strata::jinja::builtin {

using K = Value::Kind;

[[noreturn]] inline void type_error(const std::string& what) { throw Error(what); }

inline bool is_int_like(const Value& v) { return v.is_int() || v.kind() == K::Bool; }
inline int64_t int_of(const Value& v) { return v.is_int() ? v.as_int() : int64_t{v.as_bool()}; }

// A string or list being built: past the longest one operation may make, or past what the
// render's budget has left, it stops here (before it is built further, not once it is whole).
inline void check_text(size_t bytes) {
  if (bytes > kMaxText) throw Error("a string longer than the template limit");
  if (bytes > bytes_left(kMaxText)) charge_bytes(bytes);  // fails, naming the budget
}
inline void check_items(size_t items) {
  if (items > kMaxItems) throw Error("a list longer than the template limit");
  const uint64_t bytes = static_cast<uint64_t>(items) * sizeof(Value);
  if (bytes > bytes_left(UINT64_MAX)) charge_bytes(bytes);  // fails, naming the budget
}

// A call's argument at position i or by name; an error naming the function when absent (or, for
// string_arg, not a str).
const Value& arg_at(const CallArgs& a, size_t i, const std::string& name, const char* fn);
const std::string& string_arg(const CallArgs& a, size_t i, const std::string& name,
                              const char* fn);

// A method bound to its object, as `obj.name` evaluates to.
inline Value bound(std::string name, Function f) {
  return Value(Callable{std::move(name), std::move(f)});
}

List dict_items(const Dict& d);  // (key, value) tuples, in the dict's order

// Python's str methods (jinja_text.cpp): whitespace is Python's, Unicode-aware; case mapping
// is ASCII only, as the templates need.
bool py_space(char32_t c);
std::string strip(const std::string& s, const Value* chars, bool left, bool right);
List split(const std::string& s, const Value* sep, const Value* maxsplit);
std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count);
// str.splitlines() for \n, \r and \r\n: the lines without their breaks, no empty last line.
std::vector<std::string> split_lines(const std::string& s);
inline char32_t to_upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
inline char32_t to_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
inline bool is_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
std::string map_chars(const std::string& s, char32_t (*f)(char32_t));
std::string capitalize(const std::string& s);
std::string title(const std::string& s);
bool starts_or_ends(const std::string& s, const Value& prefixes, bool start);

}  // namespace strata::jinja::builtin
