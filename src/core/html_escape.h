// Text for HTML reports: the characters that would start markup or an entity escaped.
#pragma once

#include <string>

namespace strata {

std::string html_escape(const std::string& s);

}  // namespace strata
