// Wall-clock timing and process memory figures for reports.
#pragma once

#include <chrono>
#include <cstdint>

namespace strata {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Peak resident set size of this process so far, in bytes (getrusage ru_maxrss).
uint64_t peak_rss_bytes();

}  // namespace strata
