#include "cli/line_reader.h"

#include <editline/readline.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace strata {

LineReader::LineReader() : editing_(isatty(0) != 0 && isatty(1) != 0) {}

std::optional<std::string> LineReader::read(const std::string& prompt, bool* interrupted) {
  *interrupted = false;
  if (!editing_) {
    fmt::print("{}", prompt);
    std::fflush(stdout);
    std::string line;
    if (std::getline(std::cin, line)) return line;
    if (!std::cin.eof()) {  // a signal ended the read, not the input
      std::cin.clear();
      *interrupted = true;
    }
    return std::nullopt;
  }
  errno = 0;
  char* raw = ::readline(prompt.c_str());
  if (raw == nullptr) {
    *interrupted = errno == EINTR;
    return std::nullopt;
  }
  std::string line(raw);
  std::free(raw);
  if (!line.empty()) ::add_history(line.c_str());
  return line;
}

}  // namespace strata
