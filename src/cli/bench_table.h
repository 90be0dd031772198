// `strata bench`'s rows as llama-bench prints them: one row per (threads, test), a test being
// "pp512" (a prompt of 512 tokens) or "tg128" (128 tokens decoded), in llama-bench's output
// formats (md, csv, json, jsonl) with its column and field names, so scripts written for
// llama-bench read strata's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct BenchRow {
  std::string model_file, model_type;  // model_type: "llama 1.1B Q4_0"
  uint64_t model_size = 0;             // bytes of the file
  uint64_t model_params = 0;
  std::string backend;  // "CPU", "CUDA"
  int threads = 0;
  int n_prompt = 0, n_gen = 0;  // one of them is 0
  std::vector<double> samples;  // tokens/s per repetition

  std::string test() const;  // "pp512", "tg128"
  double average() const;
  double stddev() const;  // sample standard deviation (0 for one sample)
  double median() const;
};

// The median of measurements (the mean of the middle two for an even count; 0 for none): what
// every figure strata bench reports is.
double median_of(std::vector<double> values);

enum class BenchFormat { Markdown, Csv, Json, Jsonl };

// "md", "csv", "json", "jsonl"; nullopt-like failure is a one-line error naming the formats.
BenchFormat bench_format_from_name(const std::string& name);

std::string format_bench_rows(const std::vector<BenchRow>& rows, BenchFormat format);

// "512" or "16,32,64" (llama-bench's lists): each value in [lo, hi], at least one.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text, int lo, int hi);

// "1.10 B", "7.14 M": a parameter count as llama-bench shows it.
std::string params_label(uint64_t params);
// "636.18 MiB", "12.55 GiB".
std::string size_label(uint64_t bytes);

}  // namespace strata
