// A JSON schema strata cannot turn into a grammar: the keyword it stops at, and why.
#pragma once

#include <stdexcept>
#include <string>

namespace strata {

class SchemaError : public std::runtime_error {
 public:
  SchemaError(const std::string& keyword, const std::string& message)
      : std::runtime_error(message), keyword_(keyword) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

}  // namespace strata
