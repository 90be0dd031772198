#include "server/http_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace strata {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool equals_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool bearer_matches(std::string_view value, std::string_view key) {
  constexpr std::string_view scheme = "bearer";
  if (value.size() <= scheme.size() ||
      !equals_ignoring_case(value.substr(0, scheme.size()), scheme) || value[scheme.size()] != ' ')
    return false;
  std::string_view token = value.substr(scheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  return !token.empty() && equals_in_constant_time(token, key);
}

// The message framing as RFC 9112 §6 requires it, or why not: one Content-Length of digits,
// one Transfer-Encoding, never both (each a request smuggling vector behind a proxy that reads
// the other), one Host. httplib takes the first of duplicated headers silently.
std::string framing_problem(const httplib::Request& req) {
  for (const char* name : {"Content-Length", "Transfer-Encoding", "Host", "Authorization"})
    if (req.get_header_value_count(name) > 1)
      return fmt::format("the request has more than one {} header", name);
  if (req.has_header("Content-Length")) {
    const std::string length = req.get_header_value("Content-Length");
    if (length.empty() || length.size() > 18 ||
        !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fmt::format("Content-Length '{}' is not a number of bytes", length.substr(0, 32));
    if (req.has_header("Transfer-Encoding"))
      return "the request has both Content-Length and Transfer-Encoding";
  }
  return "";
}

// A request body with neither length nor chunks ends only when the connection does: httplib
// read until then (the receive deadline, and no answer). RFC 9112 §6.3 gives such a request no
// body; one that means to send one is told (nginx's 411).
bool lacks_length(const httplib::Request& req) {
  return (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
         !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding");
}

}  // namespace strata
