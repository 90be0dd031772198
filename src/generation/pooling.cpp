#include "generation/pooling.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "format/gguf.h"

namespace strata {

Pooling parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  fail("unknown pooling '{}' (mean, cls or last)", name);
}

std::string_view pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
  }
  return "?";
}

std::optional<Pooling> model_pooling(const GgufFile& file, std::string_view architecture) {
  const std::string key = std::string(architecture) + ".pooling_type";
  const int64_t type = file.get_int(key, 0);
  switch (type) {
    case 0: return std::nullopt;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 3: return Pooling::Last;
    default: fail("{} is {}: strata pools by mean (1), cls (2) or last (3)", key, type);
  }
}

bool pooled_token(Pooling pooling, int64_t i, int64_t n) {
  switch (pooling) {
    case Pooling::Mean: return true;
    case Pooling::Cls: return i == 0;
    case Pooling::Last: return i == n - 1;
  }
  return false;
}

void PooledEmbedding::add(std::span<const float> hidden) {
  if (hidden.size() != sum_.size())
    fail("a hidden state of {} values pooled into {}", hidden.size(), sum_.size());
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += hidden[i];
  ++added_;
}

std::vector<float> PooledEmbedding::result() const {
  // The mean's scale cancels in the normalization; it matters only for an all-zero sum.
  double norm = 0;
  for (const double v : sum_) norm += v * v;
  norm = std::sqrt(norm);
  std::vector<float> out(sum_.size());
  const double scale = norm > 0 ? 1.0 / norm : (added_ > 0 ? 1.0 / static_cast<double>(added_) : 1.0);
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = static_cast<float>(sum_[i] * scale);
  return out;
}

}  // namespace strata
