// Progress of long work on stderr: a bar redrawn in place on a terminal; when stderr is a pipe
// or a file, a line at every tenth once the work has run 5 seconds (short work stays quiet, so
// logs and tests stay clean).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace strata {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)),
        terminal_(isatty(2) != 0),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { finish(); }

  // `unit` "bytes" shows GB; anything else shows the counts with that word.
  void update(uint64_t done, uint64_t total, const std::string& unit = "bytes") {
    if (total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    const std::string amount =
        unit == "bytes" ? std::to_string(done / 1e9).substr(0, 4) + "/" +
                              std::to_string(total / 1e9).substr(0, 4) + " GB"
        : unit.find(' ') != std::string::npos
            ? unit
            : std::to_string(done) + "/" + std::to_string(total) + " " + unit;
    if (!terminal_) return log_line(percent, amount);
    const int width = 30, filled = percent * width / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %s", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), percent, amount.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fprintf(stderr, "\n");
    shown_ = false;
  }

 private:
  void log_line(int percent, const std::string& amount) {
    const int tenth = percent / 10;
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    if (std::chrono::steady_clock::now() - start_ < std::chrono::seconds(5)) return;
    std::fprintf(stderr, "%s: %d%% (%s)\n", label_.c_str(), tenth * 10, amount.c_str());
    std::fflush(stderr);
  }

  std::string label_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  int last_tenth_ = -1;
  bool shown_ = false;
  int last_percent_ = -1;
};

}  // namespace strata
