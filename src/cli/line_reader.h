// Lines typed at an interactive prompt: on a terminal through libedit (arrows move and recall
// earlier lines, as in a shell), otherwise read plainly from stdin (pipes, tests).
#pragma once

#include <optional>
#include <string>

namespace strata {

class LineReader {
 public:
  LineReader();
  // The next line without its newline; nullopt at the end of input (Ctrl-D). `interrupted`
  // tells whether Ctrl-C ended the wait (then the caller asks again).
  std::optional<std::string> read(const std::string& prompt, bool* interrupted);
  bool editing() const { return editing_; }

 private:
  bool editing_;
};

}  // namespace strata
