#include "cli/bench_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"

namespace strata {

std::string BenchRow::test() const {
  return n_prompt > 0 ? fmt::format("pp{}", n_prompt) : fmt::format("tg{}", n_gen);
}

double BenchRow::average() const {
  if (samples.empty()) return 0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) /
         static_cast<double>(samples.size());
}

double BenchRow::stddev() const {
  if (samples.size() < 2) return 0;
  const double mean = average();
  double sum = 0;
  for (double s : samples) sum += (s - mean) * (s - mean);
  return std::sqrt(sum / static_cast<double>(samples.size() - 1));
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

double BenchRow::median() const {
  return median_of(samples);
}

BenchFormat bench_format_from_name(const std::string& name) {
  if (name == "md") return BenchFormat::Markdown;
  if (name == "csv") return BenchFormat::Csv;
  if (name == "json") return BenchFormat::Json;
  if (name == "jsonl") return BenchFormat::Jsonl;
  fail("-o '{}' is not an output format: md, csv, json or jsonl", name.substr(0, 32));
}

std::string params_label(uint64_t params) {
  const double p = static_cast<double>(params);
  if (p >= 1e9) return fmt::format("{:.2f} B", p / 1e9);
  if (p >= 1e6) return fmt::format("{:.2f} M", p / 1e6);
  return fmt::format("{:.2f} K", p / 1e3);
}

std::string size_label(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
}

namespace {

nlohmann::json row_json(const BenchRow& r) {
  return {{"model_filename", r.model_file},
          {"model_type", r.model_type},
          {"model_size", r.model_size},
          {"model_n_params", r.model_params},
          {"backends", r.backend},
          {"n_threads", r.threads},
          {"n_prompt", r.n_prompt},
          {"n_gen", r.n_gen},
          {"avg_ts", r.average()},
          {"stddev_ts", r.stddev()},
          {"median_ts", r.median()},
          {"samples_ts", r.samples}};
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    q.push_back(c);
    if (c == '"') q.push_back('"');
  }
  q.push_back('"');
  return q;
}

std::string markdown(const std::vector<BenchRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows)
    cells.push_back({r.model_type, size_label(r.model_size), params_label(r.model_params),
                     r.backend, std::to_string(r.threads), r.test(),
                     fmt::format("{:.2f} ± {:.2f}", r.average(), r.stddev())});
  const std::vector<std::string> head = {"model",   "size", "params", "backend",
                                         "threads", "test", "t/s"};
  std::vector<size_t> width(head.size());
  // Widths in characters: "±" is two bytes of UTF-8 but one column.
  auto columns = [](const std::string& s) {
    return static_cast<size_t>(std::count_if(s.begin(), s.end(),
                                             [](char c) { return (c & 0xC0) != 0x80; }));
  };
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = columns(head[c]);
    for (const auto& row : cells) width[c] = std::max(width[c], columns(row[c]));
  }
  // Text columns left-aligned, numbers right-aligned (llama-bench's alignment).
  auto right = [](size_t c) { return c == 1 || c == 2 || c == 4 || c == 6; };
  auto line = [&](const std::vector<std::string>& v) {
    std::string out = "|";
    for (size_t c = 0; c < v.size(); ++c) {
      const std::string pad(width[c] - columns(v[c]), ' ');
      out += fmt::format(" {}{} |", right(c) ? pad : v[c], right(c) ? v[c] : pad);
    }
    out.push_back('\n');
    return out;
  };
  std::string out = line(head);
  out.push_back('|');
  for (size_t c = 0; c < head.size(); ++c)
    out += right(c) ? fmt::format("{}:|", std::string(width[c] + 1, '-'))
                    : fmt::format(" {} |", std::string(width[c], '-'));
  out.push_back('\n');
  for (const auto& row : cells) out += line(row);
  return out;
}

}  // namespace

std::string format_bench_rows(const std::vector<BenchRow>& rows, BenchFormat format) {
  switch (format) {
    case BenchFormat::Markdown:
      return markdown(rows);
    case BenchFormat::Csv: {
      std::string out =
          "model_filename,model_type,model_size,model_n_params,backends,n_threads,n_prompt,n_gen,"
          "avg_ts,stddev_ts,median_ts\n";
      for (const auto& r : rows)
        out += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f}\n",
                           csv_field(r.model_file), csv_field(r.model_type), r.model_size,
                           r.model_params, csv_field(r.backend), r.threads, r.n_prompt, r.n_gen,
                           r.average(), r.stddev(), r.median());
      return out;
    }
    case BenchFormat::Json: {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& r : rows) all.push_back(row_json(r));
      return all.dump(2) + "\n";
    }
    case BenchFormat::Jsonl: {
      std::string out;
      for (const auto& r : rows) out += row_json(r).dump() + "\n";
      return out;
    }
  }
  return {};
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int lo,
                                 int hi) {
  std::vector<int> values;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      fail("{}: '{}' is not a whole number (a list is written 16,32,64)", flag,
           item.substr(0, 32));
    if (v < lo || v > hi) fail("{}: {} is outside [{}, {}]", flag, v, lo, hi);
    values.push_back(static_cast<int>(v));
    start = comma + 1;
  }
  return values;
}

}  // namespace strata
