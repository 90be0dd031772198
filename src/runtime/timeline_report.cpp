#include "runtime/timeline_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/html_escape.h"

namespace strata {

namespace {

// Seconds of [start, end) covered by at least one of the intervals.
double covered(std::vector<std::pair<double, double>> intervals, double start, double end) {
  for (auto& [a, b] : intervals) a = std::max(a, start), b = std::min(b, end);
  std::erase_if(intervals, [](const auto& i) { return i.second <= i.first; });
  std::sort(intervals.begin(), intervals.end());
  double total = 0, reach = start;
  for (const auto& [a, b] : intervals) {
    if (b <= reach) continue;
    total += b - std::max(a, reach);
    reach = b;
  }
  return total;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Colours of the parts (TimelinePart's order) and of reads (own, look-ahead).
constexpr const char* kPartColour[kTimelineParts] = {"#4e79a7", "#f28e2b", "#edc948", "#b07aa1",
                                                     "#e15759", "#59a14f", "#ff9da7", "#9c755f"};
constexpr const char* kReadColour = "#76b7b2";
constexpr const char* kAheadColour = "#bab0ac";

}  // namespace

TimelineSummary summarize_timeline(const Timeline& timeline, const DiskSeconds& disk) {
  TimelineSummary s;
  const std::vector<TimelineToken> tokens = timeline.tokens();
  const std::vector<TimelineSpan> spans = timeline.spans();
  const std::vector<TimelineRead> reads = timeline.reads();
  s.tokens.resize(tokens.size());
  for (const TimelineSpan& sp : spans)
    if (sp.token >= 0 && static_cast<size_t>(sp.token) < tokens.size())
      s.tokens[static_cast<size_t>(sp.token)].part[static_cast<size_t>(sp.part)] +=
          sp.end - sp.start;
  std::vector<std::pair<double, double>> in_flight;
  for (const TimelineRead& r : reads) {
    in_flight.push_back({r.issued, r.completed});
    if (r.token < 0 || static_cast<size_t>(r.token) >= tokens.size()) continue;
    TimelineTokenSummary& t = s.tokens[static_cast<size_t>(r.token)];
    t.bytes += r.bytes;
    t.requests += r.requests;
    if (disk && r.requests > 0) t.io_disk += disk(r.bytes, r.requests);
  }
  std::vector<double> totals;
  for (size_t i = 0; i < tokens.size(); ++i) {
    TimelineTokenSummary& t = s.tokens[i];
    t.total = tokens[i].end - tokens[i].start;
    t.other = t.total;
    for (double p : t.part) t.other -= p;
    t.io_busy = covered(in_flight, tokens[i].start, tokens[i].end);
    totals.push_back(t.total);
  }
  const double n = std::max<double>(1.0, static_cast<double>(tokens.size()));
  for (const TimelineTokenSummary& t : s.tokens) {
    s.mean.total += t.total / n;
    for (size_t p = 0; p < t.part.size(); ++p) s.mean.part[p] += t.part[p] / n;
    s.mean.other += t.other / n;
    s.mean.io_busy += t.io_busy / n;
    s.mean.io_disk += t.io_disk / n;
  }
  uint64_t bytes = 0, requests = 0;
  for (const TimelineTokenSummary& t : s.tokens) bytes += t.bytes, requests += t.requests;
  s.mean.bytes = tokens.empty() ? 0 : bytes / tokens.size();
  s.mean.requests = tokens.empty() ? 0 : requests / tokens.size();
  s.median_total = median(totals);
  return s;
}

nlohmann::json timeline_json(const TimelineSummary& s) {
  const auto ms = [](double seconds) { return 1e3 * seconds; };
  nlohmann::json parts;
  for (int p = 0; p < kTimelineParts; ++p)
    parts[timeline_part_name(static_cast<TimelinePart>(p))] =
        ms(s.mean.part[static_cast<size_t>(p)]);
  parts["other"] = ms(s.mean.other);
  nlohmann::json tokens = nlohmann::json::array();
  for (const TimelineTokenSummary& t : s.tokens)
    tokens.push_back({{"total_ms", ms(t.total)},
                      {"read_wait_ms", ms(t.part[static_cast<size_t>(TimelinePart::ReadWait)])},
                      {"io_busy_ms", ms(t.io_busy)},
                      {"bytes_read", t.bytes}});
  return {{"tokens_recorded", s.tokens.size()},       {"mean_ms_per_token", parts},
          {"mean_total_ms", ms(s.mean.total)},        {"median_total_ms", ms(s.median_total)},
          {"compute_ms", ms(s.mean.compute())},       {"io_busy_ms", ms(s.mean.io_busy)},
          {"io_at_disk_rate_ms", ms(s.mean.io_disk)}, {"bytes_read_per_token", s.mean.bytes},
          {"reads_per_token", s.mean.requests},       {"per_token", tokens}};
}

std::string timeline_table(const TimelineSummary& s) {
  const TimelineTokenSummary& m = s.mean;
  std::string parts;
  for (int p = 0; p < kTimelineParts; ++p)
    if (m.part[static_cast<size_t>(p)] > 0)
      parts += fmt::format("{} {:.1f}, ", timeline_part_name(static_cast<TimelinePart>(p)),
                           1e3 * m.part[static_cast<size_t>(p)]);
  std::string out =
      fmt::format("timeline ({} tokens): {:.1f} ms a token (median {:.1f}): {}other {:.1f}\n",
                  s.tokens.size(), 1e3 * m.total, 1e3 * s.median_total, parts, 1e3 * m.other);
  if (m.bytes > 0) {
    out += fmt::format(
        "timeline reads: {:.1f} MiB in {} requests a token, in flight {:.1f} ms, the main thread "
        "waited {:.1f} ms",
        static_cast<double>(m.bytes) / 1048576.0, m.requests, 1e3 * m.io_busy,
        1e3 * m.part[static_cast<size_t>(TimelinePart::ReadWait)]);
    if (m.io_disk > 0)
      out += fmt::format("; at the disk's measured rate {:.1f} ms", 1e3 * m.io_disk);
    out += fmt::format("; compute {:.1f} ms\n", 1e3 * m.compute());
  }
  return out;
}

std::string timeline_html(const Timeline& timeline, const TimelineSummary& s,
                          const std::string& title, size_t max_tokens) {
  const std::vector<TimelineToken> tokens = timeline.tokens();
  const std::vector<TimelineSpan> spans = timeline.spans();
  const std::vector<TimelineRead> reads = timeline.reads();
  const size_t shown = std::min(tokens.size(), max_tokens);
  double longest = 1e-9;
  for (size_t i = 0; i < shown; ++i) longest = std::max(longest, tokens[i].end - tokens[i].start);
  const double width = 1100, left = 70, lane = 16, row = 44;
  const double x_of = 1.0 / longest * width;
  std::string svg;
  const double height = 40 + row * static_cast<double>(shown);
  svg += fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{:.0f}' height='{:.0f}' "
      "font-family='sans-serif' font-size='11'>\n",
      left + width + 20, height);
  for (int tick = 0; tick <= 10; ++tick) {  // a time axis: ten steps of the longest token
    const double x = left + width * tick / 10.0;
    svg += fmt::format(
        "<line x1='{0:.1f}' y1='14' x2='{0:.1f}' y2='{1:.0f}' stroke='#ddd'/>"
        "<text x='{0:.1f}' y='11' text-anchor='middle'>{2:.0f} ms</text>\n",
        x, height, 1e3 * longest * tick / 10.0);
  }
  const auto rect = [&](double x0, double x1, double y, double h, const char* colour,
                        const std::string& tip) {
    svg += fmt::format(
        "<rect x='{:.2f}' y='{:.1f}' width='{:.2f}' height='{:.0f}' fill='{}'><title>{}</title>"
        "</rect>\n",
        left + x0 * x_of, y, std::max(0.3, (x1 - x0) * x_of), h, colour, html_escape(tip));
  };
  for (size_t i = 0; i < shown; ++i) {
    const double y = 20 + row * static_cast<double>(i), t0 = tokens[i].start;
    svg += fmt::format("<text x='4' y='{:.0f}'>token {}</text>\n", y + 12, i);
    svg += fmt::format("<text x='4' y='{:.0f}' fill='#666'>reads</text>\n", y + lane + 13);
    for (const TimelineSpan& sp : spans)
      if (sp.token == static_cast<int32_t>(i))
        rect(sp.start - t0, sp.end - t0, y, lane, kPartColour[static_cast<size_t>(sp.part)],
             fmt::format("layer {} {}: {:.2f} ms", sp.layer, timeline_part_name(sp.part),
                         1e3 * (sp.end - sp.start)));
    for (const TimelineRead& r : reads)
      if (r.completed > tokens[i].start && r.issued < tokens[i].end)
        rect(std::max(r.issued, tokens[i].start) - t0, std::min(r.completed, tokens[i].end) - t0,
             y + lane + 2, lane - 4, r.ahead ? kAheadColour : kReadColour,
             fmt::format("layer {} {}reads: {} in {:.2f} ms, {:.1f} KiB", r.layer,
                         r.ahead ? "look-ahead " : "", r.requests, 1e3 * (r.completed - r.issued),
                         static_cast<double>(r.bytes) / 1024.0));
  }
  svg += "</svg>\n";
  std::string legend;
  for (int p = 0; p < kTimelineParts; ++p)
    legend += fmt::format("<span style='background:{};padding:0 8px'>&nbsp;</span> {} &nbsp; ",
                          kPartColour[p], timeline_part_name(static_cast<TimelinePart>(p)));
  legend += fmt::format(
      "<span style='background:{};padding:0 8px'>&nbsp;</span> reads in flight &nbsp; "
      "<span style='background:{};padding:0 8px'>&nbsp;</span> look-ahead reads",
      kReadColour, kAheadColour);
  return fmt::format(
      "<!doctype html><html><head><meta charset='utf-8'><title>{0}</title></head>"
      "<body style='font-family:sans-serif'><h2>{0}</h2><pre>{1}</pre><p>{2}</p>{3}"
      "<p>Each token: the main thread's work on the upper lane (hover for layer and time), "
      "flash reads in flight below.</p></body></html>\n",
      html_escape(title), html_escape(timeline_table(s)), legend, svg);
}

}  // namespace strata
