// Writes GGUF version 3. Tensor infos are declared first (their sizes follow from type and
// shape), then data is streamed tensor by tensor in declaration order, so a writer never holds
// a whole model in memory. The file appears under its final name only after finish(): until
// then it is written to "<path>.tmp", which is removed if the writer is destroyed unfinished.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace strata {

class GgufWriter {
 public:
  explicit GgufWriter(std::string path, uint64_t alignment = 32);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void set(const std::string& key, GgufValue value);
  void erase(const std::string& key);
  // Writes PowerInfer's "PWRI" magic instead of "GGUF" (the rest of the format is the same).
  void set_powerinfer_magic(bool on) { powerinfer_magic_ = on; }
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> dims);

  // Writes the next declared tensor's bytes (exactly its size). May be called in pieces.
  void write_tensor_data(std::span<const uint8_t> bytes);
  void finish();

 private:
  void write_header();
  void write_raw(const void* data, size_t n);

  std::string path_;
  std::string tmp_path_;
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;
  FILE* out_ = nullptr;
  bool header_written_ = false;
  size_t current_ = 0;            // tensor being written
  uint64_t current_written_ = 0;  // bytes of it so far
  uint64_t position_ = 0;
  bool finished_ = false;
  bool powerinfer_magic_ = false;
};

}  // namespace strata
