// Embeddings from a decoder's final hidden states (llama.cpp's --pooling): the mean of every
// token's, the first token's (cls) or the last token's, then scaled to unit length (OpenAI's
// embeddings are, and llama.cpp's by default), so a dot product is the cosine similarity.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace strata {

class GgufFile;

enum class Pooling { Mean, Cls, Last };

// "mean", "cls", "last"; fails (strata::Error) naming anything else.
Pooling parse_pooling(std::string_view name);
std::string_view pooling_name(Pooling pooling);
// The model's own, from `<arch>.pooling_type` as llama.cpp writes it (1 mean, 2 cls, 3 last);
// nullopt when the file has none or says none (0), which an embedding model would not.
// Fails on a value strata cannot pool by (4: rank, or unknown), naming it.
std::optional<Pooling> model_pooling(const GgufFile& file, std::string_view architecture);

// Whether token i of an n-token input takes part.
bool pooled_token(Pooling pooling, int64_t i, int64_t n);

// Sums the hidden states of the tokens that take part (any order), then gives the embedding.
class PooledEmbedding {
 public:
  explicit PooledEmbedding(int64_t dim) : sum_(static_cast<size_t>(dim), 0.0) {}
  void add(std::span<const float> hidden);
  // The mean of what was added, scaled to unit length (left as it is when it is all zeros).
  std::vector<float> result() const;
  int64_t added() const { return added_; }

 private:
  std::vector<double> sum_;  // double: thousands of rows added without losing the small ones
  int64_t added_ = 0;
};

}  // namespace strata
