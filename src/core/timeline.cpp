#include "core/timeline.h"

namespace strata {

const char* timeline_part_name(TimelinePart part) {
  switch (part) {
    case TimelinePart::Attention:
      return "attention";
    case TimelinePart::Predictor:
      return "predictor";
    case TimelinePart::Selection:
      return "selection";
    case TimelinePart::CacheLookup:
      return "cache_lookup";
    case TimelinePart::ReadWait:
      return "read_wait";
    case TimelinePart::Ffn:
      return "ffn";
    case TimelinePart::Ahead:
      return "lookahead";
    case TimelinePart::Output:
      return "output";
  }
  return "?";
}

void Timeline::begin_token() {
  const double t = now();
  const std::lock_guard lock(mutex_);
  tokens_.push_back({t, t});
  token_ = static_cast<int32_t>(tokens_.size() - 1);
}

void Timeline::end_token() {
  const double t = now();
  const std::lock_guard lock(mutex_);
  if (!tokens_.empty()) tokens_.back().end = t;
}

void Timeline::span(TimelinePart part, int64_t layer, double start, double end) {
  const std::lock_guard lock(mutex_);
  spans_.push_back({token_, static_cast<int32_t>(layer), part, start, end});
}

void Timeline::read(int64_t layer, bool ahead, double issued, double completed, uint64_t bytes,
                    uint64_t requests) {
  const std::lock_guard lock(mutex_);
  reads_.push_back(
      {token_, static_cast<int32_t>(layer), ahead, issued, completed, bytes, requests});
}

void Timeline::clear() {
  const std::lock_guard lock(mutex_);
  tokens_.clear();
  spans_.clear();
  reads_.clear();
  token_ = -1;
}

std::vector<TimelineToken> Timeline::tokens() const {
  const std::lock_guard lock(mutex_);
  return tokens_;
}

std::vector<TimelineSpan> Timeline::spans() const {
  const std::lock_guard lock(mutex_);
  return spans_;
}

std::vector<TimelineRead> Timeline::reads() const {
  const std::lock_guard lock(mutex_);
  return reads_;
}

}  // namespace strata
