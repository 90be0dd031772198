// The chat templates strata ships, by name (`--chat-template NAME`).
#pragma once

#include <string>
#include <vector>

namespace strata {

struct BuiltinTemplate {
  const char* name;
  const char* source;  // Jinja
};

const std::vector<BuiltinTemplate>& builtin_templates();

}  // namespace strata
