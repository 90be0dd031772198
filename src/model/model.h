// A loaded model: the mapped GGUF file, its config, weight views and tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace strata {

struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the file has no tokenizer metadata

  // Opens and validates everything; throws Error with a one-line message on any problem.
  // LoadMode::Read (the default) copies the file into huge-page memory for faster decode;
  // LoadMode::Map uses it in place (--mmap).
  static std::unique_ptr<Model> load(const std::string& path, bool require_tokenizer = true,
                                     LoadMode mode = LoadMode::Read);

  // Gives every layer an ffn_down_t (the sparse FFN needs one), transposing ffn_down where the
  // file lacks it. Returns the bytes allocated for that (0 when the file has them).
  uint64_t ensure_down_t();

  // Interleaves the Q4_0/Q8_0 matrices only ever multiplied whole (tensor/interleaved_rows.h): the
  // attention projections, the output (unless tied to the embedding) and, when `ffn` is set
  // (dense FFN), gate/up/down. In place, no memory; only for models loaded with LoadMode::Read
  // (a mapped file's pages are the page cache's). Returns the matrices interleaved.
  int interleave_rows(bool ffn);

 private:
  std::vector<std::vector<uint8_t>> derived_;  // storage of tensors built at load time
};

}  // namespace strata
