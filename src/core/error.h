// One exception type for every user-facing failure: its message is a single line naming the
// problem (file, tensor, key, flag), which the front ends print as "error: <message>".
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace strata
