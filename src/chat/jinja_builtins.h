// What a template may do to values, as Jinja2 (under Hugging Face's chat-template environment)
// does it: operators, subscripts, attributes and the Python methods templates call on strings,
// dicts and lists, the built-in filters and tests, and the globals (range, namespace, dict,
// raise_exception, strftime_now). Anything outside this set is an Error naming it, never a
// silent empty string. Results are bounded (kMaxItems, kMaxText) so no template can exhaust
// memory.
#pragma once

#include <string>

#include "chat/jinja_value.h"

namespace strata::jinja {

constexpr size_t kMaxItems = 1 << 20;  // longest list a range or repetition may make
constexpr size_t kMaxText = 64 << 20;  // longest string an operation may make (bytes)

Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // Python's `item in container`
Value get_item(const Value& obj, const Value& key);         // obj[key]; undefined if absent
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value get_attribute(const Value& obj, const std::string& name);  // obj.name: method, then key
// The items a for loop visits (dict: its keys; str: its characters).
List iterate(const Value& v);
// Fails with the undefined value's own message when v is undefined.
void require_defined(const Value& v);

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);
Dict global_functions();
// Whether apply_filter / apply_test know `name` (a template is checked when parsed).
bool is_filter(const std::string& name);
bool is_test(const std::string& name);

}  // namespace strata::jinja
