// Spans of a backend's timeline whose seconds go to ForwardTimes fields once the work has run:
// recorded as the forward pass queues ops, resolved after the pass's last synchronize, so
// timing never makes an asynchronous device (a GPU stream) wait in the middle of a pass.
#pragma once

#include <vector>

#include "backends/backend.h"

namespace strata {

class TimeSpans {
 public:
  // total += sign * (to - from) when resolved; `by`: the backend that recorded the events
  // (null: the one resolve() is given).
  void add(const Event& from, const Event& to, double* total, double sign = 1,
           const Backend* by = nullptr) {
    spans_.push_back({from, to, total, sign, by});
  }
  // Every span's seconds added; the backends must have finished the work (synchronize()).
  void resolve(const Backend& backend) {
    for (const Span& s : spans_)
      *s.total += s.sign * (s.by != nullptr ? *s.by : backend).elapsed(s.from, s.to);
    spans_.clear();
  }

 private:
  struct Span {
    Event from, to;
    double* total;
    double sign;
    const Backend* by;
  };
  std::vector<Span> spans_;
};

}  // namespace strata
