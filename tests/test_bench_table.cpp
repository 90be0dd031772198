// `strata bench`'s llama-bench rows: lists parsed as llama-bench writes them, and each output
// format readable by what reads llama-bench's (a Markdown table with its separator row, CSV with
// a header, JSON, one JSON object a line).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/bench_table.h"
#include "core/error.h"

namespace strata {
namespace {

std::vector<BenchRow> two_rows() {
  BenchRow pp{"m.gguf", "llama 1.10B Q4_0", 636u << 20, 1100000000, "CPU", 2, 512, 0,
              {100, 110, 120}};
  BenchRow tg = pp;
  tg.n_prompt = 0, tg.n_gen = 128, tg.samples = {20};
  return {pp, tg};
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

TEST(BenchTable, ListsAreParsedAndCheckedAsLlamaBenchWritesThem) {
  EXPECT_EQ(parse_int_list("-p", "512", 0, 1000), std::vector<int>{512});
  EXPECT_EQ(parse_int_list("-p", "16,32,64", 0, 1000), (std::vector<int>{16, 32, 64}));
  EXPECT_THROW(parse_int_list("-p", "16,,32", 0, 1000), Error);
  EXPECT_THROW(parse_int_list("-p", "16,x", 0, 1000), Error);
  EXPECT_THROW(parse_int_list("-t", "0", 1, 8), Error);
  EXPECT_THROW(parse_int_list("-p", "", 0, 8), Error);
  EXPECT_THROW(parse_int_list("-p", "4,", 0, 8), Error);
}

TEST(BenchTable, StatisticsOfTheSamples) {
  const auto rows = two_rows();
  EXPECT_EQ(rows[0].test(), "pp512");
  EXPECT_EQ(rows[1].test(), "tg128");
  EXPECT_DOUBLE_EQ(rows[0].average(), 110);
  EXPECT_DOUBLE_EQ(rows[0].stddev(), 10);
  EXPECT_DOUBLE_EQ(rows[0].median(), 110);
  EXPECT_DOUBLE_EQ(rows[1].stddev(), 0);
}

TEST(BenchTable, MarkdownIsATableWithItsSeparatorRow) {
  const auto md = lines(format_bench_rows(two_rows(), BenchFormat::Markdown));
  ASSERT_EQ(md.size(), 4u);
  EXPECT_EQ(md[0].rfind("| model ", 0), 0u);
  EXPECT_NE(md[1].find("---:|"), std::string::npos);  // right-aligned number columns
  EXPECT_NE(md[2].find("| pp512 |"), std::string::npos);
  EXPECT_NE(md[2].find("110.00 ± 10.00"), std::string::npos);
  EXPECT_NE(md[2].find("636.00 MiB"), std::string::npos);
  EXPECT_NE(md[2].find("1.10 B"), std::string::npos);
  for (const auto& l : md) EXPECT_EQ(std::count(l.begin(), l.end(), '|'), 8) << l;
}

TEST(BenchTable, CsvJsonAndJsonLinesCarryLlamaBenchFieldNames) {
  const auto csv = lines(format_bench_rows(two_rows(), BenchFormat::Csv));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0].rfind("model_filename,model_type,model_size,model_n_params", 0), 0u);
  EXPECT_NE(csv[1].find(",2,512,0,110.000000,10.000000,"), std::string::npos);
  const auto json = nlohmann::json::parse(format_bench_rows(two_rows(), BenchFormat::Json));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[1]["n_gen"], 128);
  EXPECT_EQ(json[0]["samples_ts"].size(), 3u);
  EXPECT_DOUBLE_EQ(json[0]["avg_ts"].get<double>(), 110);
  const auto jsonl = lines(format_bench_rows(two_rows(), BenchFormat::Jsonl));
  ASSERT_EQ(jsonl.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(jsonl[0])["n_prompt"], 512);
  EXPECT_THROW(bench_format_from_name("xml"), Error);
  EXPECT_EQ(bench_format_from_name("jsonl"), BenchFormat::Jsonl);
}

TEST(BenchTable, CsvQuotesFieldsThatNeedIt) {
  auto rows = two_rows();
  rows[0].model_file = "a,\"b\".gguf";
  const auto csv = lines(format_bench_rows(rows, BenchFormat::Csv));
  EXPECT_EQ(csv[1].rfind("\"a,\"\"b\"\".gguf\",", 0), 0u);
}

}  // namespace
}  // namespace strata
