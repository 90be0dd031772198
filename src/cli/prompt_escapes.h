// llama.cpp's escapes in a prompt typed on the command line (-e, its default): \n \r \t \' \"
// \\ and \xHH become the characters; any other backslash stays as typed.
#pragma once

#include <string>
#include <string_view>

namespace strata {

std::string process_escapes(std::string_view text);

}  // namespace strata
