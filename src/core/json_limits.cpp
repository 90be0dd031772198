#include "core/json_limits.h"

#include <algorithm>

#include "core/error.h"

namespace strata {

JsonShape measure_json(std::string_view text) {
  JsonShape s;
  s.text_bytes = text.size();
  int depth = 0;
  bool in_string = false, escaped = false, any = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        any = true;
        break;
      case '[':
      case '{':
        s.depth = std::max(s.depth, ++depth);
        ++s.values;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',':
      case ':':  // a member's key and its value are both counted
        ++s.values;
        break;
      case ' ':
      case '\t':
      case '\r':
      case '\n':
        break;
      default:
        any = true;
    }
  }
  if (any) ++s.values;  // the last (or only) scalar, uncounted by a separator
  return s;
}

nlohmann::json parse_json_bounded(std::string_view text, const std::string& what, int max_depth) {
  // A text that does not open an array or object is no deep document: the parser refuses it
  // (or reads its one scalar) at once, with its own message ("not JSON" for a binary file).
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (text[first] != '[' && text[first] != '{'))
    return nlohmann::json::parse(text);
  check_json_depth(measure_json(text), what, max_depth);
  return nlohmann::json::parse(text);
}

void check_json_depth(const JsonShape& shape, const std::string& what, int max_depth) {
  if (shape.depth > max_depth)
    fail("{} nests arrays and objects {} deep; at most {} levels are accepted", what, shape.depth,
         max_depth);
}

}  // namespace strata
