// The embedding lookup's rows: from the weights in memory, or, for a bundled model whose
// table stays in the file (Model::load leaves it unread; 250 MB at 7B F16), one row per token
// read into a one-row buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace strata {

class EmbeddingRows {
 public:
  explicit EmbeddingRows(const Model& model);
  ~EmbeddingRows();
  EmbeddingRows(const EmbeddingRows&) = delete;
  EmbeddingRows& operator=(const EmbeddingRows&) = delete;
  // Valid until the next call.
  const uint8_t* row(int32_t token);

 private:
  const Model& model_;
  int fd_ = -1;  // the file, when the rows are read from it
  std::vector<uint8_t> row_;
};

}  // namespace strata
