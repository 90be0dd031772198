#include "generation/log_prob_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/input_file.h"

namespace strata {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr int64_t kMaxWindow = int64_t{1} << 24;
constexpr int64_t kHeaderBytes = 8 + 3 * 4;

// The row's two leading floats (scale, min_log_prob) occupy its first four uint16.
void store_float(std::span<uint16_t> row, int slot, float v) {
  std::memcpy(row.data() + 2 * slot, &v, sizeof v);
}
float load_float(std::span<const uint16_t> row, int slot) {
  float v;
  std::memcpy(&v, row.data() + 2 * slot, sizeof v);
  return v;
}

void write_all(std::FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes != 0 && std::fwrite(data, 1, bytes, f) != bytes)
    fail("cannot write the log-probability file {}", path);
}

void read_all(std::FILE* f, void* data, size_t bytes, const std::string& path, const char* what) {
  if (bytes != 0 && std::fread(data, 1, bytes, f) != bytes)
    fail("{}: the log-probability file ends inside its {}", path, what);
}

}  // namespace

int64_t packed_log_prob_row_size(int64_t n_vocab) {
  return 2 * ((n_vocab + 1) / 2) + 4;
}

double pack_log_probs(std::span<const float> logits, int32_t token, std::span<uint16_t> row) {
  float max_logit = logits[0], min_logit = logits[0];
  for (float l : logits) {
    max_logit = std::max(max_logit, l);
    min_logit = std::min(min_logit, l);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0;
  for (float l : logits) sum_exp += std::exp(l - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  store_float(row, 0, scale);
  store_float(row, 1, min_log_prob);
  std::fill(row.begin() + 4, row.end(), uint16_t{0});
  if (scale != 0) {
    const float inv_scale = 1 / scale;
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] > min_logit)  // ties to even, as llama.cpp's magic-number rounding
        row[4 + i] = static_cast<uint16_t>(std::nearbyint(inv_scale * (logits[i] - min_logit)));
  }
  return max_logit + log_sum_exp - logits[token];
}

float packed_log_prob(std::span<const uint16_t> row, int64_t i) {
  return load_float(row, 0) * row[4 + i] + load_float(row, 1);
}

LogProbFileWriter::LogProbFileWriter(const std::string& path, const LogProbFileHeader& h)
    : path_(path), row_(packed_log_prob_row_size(h.n_vocab)) {
  refuse_special_output(path);
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("cannot create the log-probability file {}: {}", path, std::strerror(errno));
  const auto n_ctx = static_cast<uint32_t>(h.n_ctx);
  const auto n_vocab = static_cast<int32_t>(h.n_vocab), n_chunk = static_cast<int32_t>(h.n_chunk);
  write_all(file_, kMagic, sizeof kMagic, path);
  write_all(file_, &n_ctx, 4, path);
  write_all(file_, &n_vocab, 4, path);
  write_all(file_, &n_chunk, 4, path);
  write_all(file_, h.tokens.data(), h.tokens.size() * sizeof(int32_t), path);
}

LogProbFileWriter::~LogProbFileWriter() {
  if (file_) std::fclose(file_);
}

void LogProbFileWriter::write_row(std::span<const float> logits, int32_t next_token) {
  pack_log_probs(logits, next_token, row_);
  write_all(file_, row_.data(), row_.size() * sizeof(uint16_t), path_);
}

void LogProbFileWriter::finish() {
  const bool ok = std::fflush(file_) == 0 && std::ferror(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) fail("cannot write the log-probability file {}", path_);
}

LogProbFileReader::LogProbFileReader(const std::string& path, int64_t n_vocab) : path_(path) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, 0, &size);
  file_ = fdopen(fd, "rb");
  if (!file_) {
    ::close(fd);
    fail("cannot read the log-probability file {}", path);
  }
  char magic[8];
  uint32_t n_ctx = 0;
  int32_t vocab = 0, n_chunk = 0;
  if (size < kHeaderBytes) fail("{} is not a log-probability file (too short)", path);
  read_all(file_, magic, 8, path, "header");
  if (std::memcmp(magic, kMagic, 8) != 0)
    fail("{} is not a log-probability file (no \"_logits_\" at its start)", path);
  read_all(file_, &n_ctx, 4, path, "header");
  read_all(file_, &vocab, 4, path, "header");
  read_all(file_, &n_chunk, 4, path, "header");
  if (n_ctx < 4 || n_ctx > kMaxWindow)
    fail("{}: a window of {} tokens is out of range (4..{})", path, n_ctx, kMaxWindow);
  if (vocab != n_vocab)
    fail("{} holds log-probabilities over {} tokens, the model has {}", path, vocab, n_vocab);
  if (n_chunk < 1) fail("{}: {} windows", path, n_chunk);
  header_ = {n_ctx, vocab, n_chunk, {}};
  const auto row = static_cast<long double>(packed_log_prob_row_size(vocab)) * 2;
  const long double expected = kHeaderBytes + 4.0L * n_ctx * n_chunk +
                               row * static_cast<long double>(scored_per_window(n_ctx)) * n_chunk;
  if (expected != static_cast<long double>(size))
    fail("{} has {} bytes where {} windows of {} tokens over {} need {:.0f}", path, size, n_chunk,
         n_ctx, vocab, static_cast<double>(expected));
  header_.tokens.resize(static_cast<size_t>(n_ctx) * n_chunk);
  read_all(file_, header_.tokens.data(), header_.tokens.size() * 4, path, "tokens");
  for (int32_t t : header_.tokens)
    if (t < 0 || t >= vocab) fail("{}: token id {} is outside the vocabulary ({})", path, t, vocab);
  row_.resize(packed_log_prob_row_size(vocab));
}

LogProbFileReader::~LogProbFileReader() {
  if (file_) std::fclose(file_);
}

std::span<const uint16_t> LogProbFileReader::next_row() {
  read_all(file_, row_.data(), row_.size() * sizeof(uint16_t), path_, "rows");
  const float scale = load_float(row_, 0), min_log_prob = load_float(row_, 1);
  if (!std::isfinite(scale) || scale < 0 || !std::isfinite(min_log_prob) || min_log_prob > 0)
    fail("{}: a row of log-probabilities has scale {} and minimum {}", path_, scale, min_log_prob);
  return row_;
}

}  // namespace strata
