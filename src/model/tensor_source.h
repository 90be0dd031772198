// A GGUF file's tensors as the loader reads them: every tensor found is claimed, so that after
// loading the ones no reader consumed can be named. llama.cpp's loader fails on a tensor it did
// not create ("wrong number of tensors"); strata refuses such a file by the tensor's name rather
// than run without it (a Llama 3.1 file run without its rope_freqs has the wrong positions).
#pragma once

#include <string>
#include <vector>

#include "format/gguf.h"

namespace strata {

class TensorSource {
 public:
  explicit TensorSource(const GgufFile& file);

  const std::string& path() const { return file_.path(); }
  const GgufFile& file() const { return file_; }
  // The file's metadata, as GgufFile has it.
  const GgufValue* find(const std::string& key) const { return file_.find(key); }
  int64_t get_int(const std::string& key) const { return file_.get_int(key); }
  std::string get_string(const std::string& key, const std::string& fallback) const {
    return file_.get_string(key, fallback);
  }
  double get_float(const std::string& key, double fallback) const {
    return file_.get_float(key, fallback);
  }
  uint64_t data_offset() const { return file_.data_offset(); }
  size_t tensor_count() const { return file_.tensors().size(); }
  // The tensor, claimed; null when the file lacks it.
  const GgufTensorInfo* find_tensor(const std::string& name);
  // Whether the file has the tensor, without claiming it.
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // Claims the tensors no text-generation graph reads but the format allows (llama.cpp loads and
  // leaves them too); returns how many were there.
  int accept_unused(const std::string& name);
  // Claims every tensor whose name starts with the prefix (a layer no graph reads).
  int accept_unused_prefix(const std::string& prefix);

  // Fails naming the first tensor not claimed (and how many more there are).
  void check_all_claimed(const std::string& architecture) const;

 private:
  const GgufFile& file_;
  std::vector<bool> claimed_;  // by index in file_.tensors()
};

}  // namespace strata
