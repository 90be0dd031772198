// A one-line progress bar on stderr for long work (only when stderr is a terminal, so logs and
// tests stay clean).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace strata {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), enabled_(isatty(2) != 0) {}
  ~ProgressBar() { finish(); }

  // `unit` "bytes" shows GB; anything else shows the counts with that word.
  void update(uint64_t done, uint64_t total, const std::string& unit = "bytes") {
    if (!enabled_ || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    const int width = 30, filled = percent * width / 100;
    const std::string amount =
        unit == "bytes" ? std::to_string(done / 1e9).substr(0, 4) + "/" +
                              std::to_string(total / 1e9).substr(0, 4) + " GB"
        : unit.find(' ') != std::string::npos
            ? unit
            : std::to_string(done) + "/" + std::to_string(total) + " " + unit;
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
  std::string label_;
  bool enabled_;
  bool shown_ = false;
  int last_percent_ = -1;
};

}  // namespace strata
