// Where a run's time goes, token by token: spans of the main thread's work (attention,
// predictor, selection, cache lookup, waiting for reads, the FFN's products, output) and the
// flash reads in flight (issued to completed, on whatever thread issued them), on one steady
// clock. Recorded by the session, its FFN executor and the flash store when a timeline is set
// (strata bench); summarised and drawn by runtime/timeline_report.h. Host work only: a span's
// end is the host clock when the work returned, which is when it ran for the CPU backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace strata {

enum class TimelinePart : uint8_t {
  Attention,    // norms, q/k/v/o products, attention itself
  Predictor,    // the layer's activation predictor
  Selection,    // the input prepared, the mask thresholded, the neuron list made
  CacheLookup,  // the flash store's bookkeeping: hits, evictions, which reads to issue
  ReadWait,     // the main thread blocked on flash reads
  Ffn,          // the FFN's products on what is resident
  Ahead,        // look-ahead: the next layer's predictor and the reads' submission
  Output,       // final norm and the vocabulary projection
};
inline constexpr int kTimelineParts = 8;
const char* timeline_part_name(TimelinePart part);

struct TimelineSpan {
  int32_t token = 0, layer = 0;
  TimelinePart part = TimelinePart::Attention;
  double start = 0, end = 0;  // seconds on the timeline's clock
};

// Reads issued together (one fetch's), in flight from `issued` to `completed`.
struct TimelineRead {
  int32_t token = 0, layer = 0;
  bool ahead = false;  // look-ahead reads (on the transfer thread)
  double issued = 0, completed = 0;
  uint64_t bytes = 0, requests = 0;
};

struct TimelineToken {
  double start = 0, end = 0;
};

class Timeline {
 public:
  Timeline() : origin_(std::chrono::steady_clock::now()) {}
  double now() const { return at(std::chrono::steady_clock::now()); }
  double at(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double>(t - origin_).count();
  }
  void begin_token();
  void end_token();
  // Any thread (look-ahead reads are recorded on the transfer thread).
  void span(TimelinePart part, int64_t layer, double start, double end);
  void read(int64_t layer, bool ahead, double issued, double completed, uint64_t bytes,
            uint64_t requests);
  // Forgets what was recorded (a benchmark keeps one repetition's decode).
  void clear();

  // Copies under the lock (the transfer thread may still be recording).
  std::vector<TimelineToken> tokens() const;
  std::vector<TimelineSpan> spans() const;
  std::vector<TimelineRead> reads() const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  int32_t token_ = -1;
  std::vector<TimelineToken> tokens_;
  std::vector<TimelineSpan> spans_;
  std::vector<TimelineRead> reads_;
};

// The recording points' helpers: nothing happens without a timeline.
inline double timeline_now(const Timeline* t) {
  return t != nullptr ? t->now() : 0.0;
}
// Records [start, now) as `part` and returns now (the next span's start).
inline double timeline_span(Timeline* t, TimelinePart part, int64_t layer, double start) {
  if (t == nullptr) return 0.0;
  const double end = t->now();
  t->span(part, layer, start, end);
  return end;
}

}  // namespace strata
