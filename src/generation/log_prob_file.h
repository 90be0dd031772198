// llama-perplexity's file of a base model's log-probabilities (`--kl-divergence-base`), in its
// layout so that a base written by either engine is read by the other: "_logits_", uint32
// n_ctx, int32 n_vocab, int32 n_chunk, the n_chunk * n_ctx evaluated tokens (int32), then for
// every scored prediction (n_ctx - 1 - n_ctx/2 per chunk) one packed row of nv = 2*ceil(n/2)+4
// uint16: float scale, float min_log_prob, and each token's log-probability as
// min_log_prob + scale * q (log-probabilities below max - 16 are stored as the minimum).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata {

// Length in uint16 of one packed row for a vocabulary of n_vocab tokens.
int64_t packed_log_prob_row_size(int64_t n_vocab);

// Packs the log-softmax of `logits` into `row` (packed_log_prob_row_size entries) and returns
// the negative log-likelihood of `token`, with llama.cpp's float arithmetic.
double pack_log_probs(std::span<const float> logits, int32_t token, std::span<uint16_t> row);

// The log-probability of token i stored in a packed row.
float packed_log_prob(std::span<const uint16_t> row, int64_t i);

// Predictions scored per window of n_ctx tokens (llama.cpp's second half, last excluded).
inline int64_t scored_per_window(int64_t n_ctx) {
  return n_ctx - 1 - n_ctx / 2;
}

struct LogProbFileHeader {
  int64_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;  // n_chunk * n_ctx
};

class LogProbFileWriter {
 public:
  // Creates `path` and writes the header; rows follow with write_row.
  LogProbFileWriter(const std::string& path, const LogProbFileHeader& header);
  ~LogProbFileWriter();
  LogProbFileWriter(const LogProbFileWriter&) = delete;
  LogProbFileWriter& operator=(const LogProbFileWriter&) = delete;

  void write_row(std::span<const float> logits, int32_t next_token);
  // Flushes and closes; fails naming the file when the disk refused a write.
  void finish();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<uint16_t> row_;
};

class LogProbFileReader {
 public:
  // Opens `path` and validates its header and length against a model of n_vocab tokens:
  // every mismatch (magic, sizes, token ids, truncation) is an Error naming the file.
  LogProbFileReader(const std::string& path, int64_t n_vocab);
  ~LogProbFileReader();
  LogProbFileReader(const LogProbFileReader&) = delete;
  LogProbFileReader& operator=(const LogProbFileReader&) = delete;

  const LogProbFileHeader& header() const { return header_; }
  // The next packed row, in file order (window by window, prediction by prediction).
  std::span<const uint16_t> next_row();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  LogProbFileHeader header_;
  std::vector<uint16_t> row_;
};

}  // namespace strata
