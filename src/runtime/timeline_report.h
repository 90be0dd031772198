// A recorded timeline (core/timeline.h) summarised per token -- where the time went, part by
// part, how long flash reads were in flight and how much of that the main thread waited -- as
// a table, JSON (strata bench --json's decode_timeline) and an HTML page with an SVG drawing
// of each token (strata bench --timeline FILE).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/timeline.h"

namespace strata {

struct TimelineTokenSummary {
  double total = 0;                           // seconds from the pass's start to its logits
  std::array<double, kTimelineParts> part{};  // seconds per part (TimelinePart's order)
  double other = 0;    // total minus the parts: what no span covers (embedding, moves, ...)
  double io_busy = 0;  // seconds with at least one read in flight (look-ahead reads included)
  double io_disk = 0;  // what the token's reads cost at the disk's measured rate (0: unknown)
  uint64_t bytes = 0, requests = 0;  // read during the token (issued within it)
  double compute() const { return total - part[static_cast<size_t>(TimelinePart::ReadWait)]; }
};

struct TimelineSummary {
  std::vector<TimelineTokenSummary> tokens;
  TimelineTokenSummary mean;  // every figure's mean over the tokens (the parts still add up)
  double median_total = 0;
};

// Seconds `requests` reads of `bytes` in all cost at the disk's rate (a storage profile's).
using DiskSeconds = std::function<double(uint64_t bytes, uint64_t requests)>;

// Per token of the timeline; reads count toward the token in which they were issued and their
// time in flight is clipped to each token's span.
TimelineSummary summarize_timeline(const Timeline& timeline, const DiskSeconds& disk = {});

// Milliseconds per token: the parts, other, total, reads in flight and their bytes.
nlohmann::json timeline_json(const TimelineSummary& summary);
// The same as a few lines of text.
std::string timeline_table(const TimelineSummary& summary);
// A page with the table and each token drawn (at most `max_tokens`, the first ones): the main
// thread's parts on one lane, the reads in flight below it.
std::string timeline_html(const Timeline& timeline, const TimelineSummary& summary,
                          const std::string& title, size_t max_tokens = 16);

}  // namespace strata
