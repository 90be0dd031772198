// Hugging Face safetensors files: an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, then the data. Read from a memory map; every range
// is checked against the file and against dtype x shape before use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace strata {

enum class SafeDType { F32, F16, BF16 };
const char* safe_dtype_name(SafeDType t);

struct SafeTensor {
  std::string name;
  SafeDType dtype = SafeDType::F32;
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch order)
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
  uint64_t n_elements() const;
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  const std::string& path() const { return file_->path(); }
  // Drops a tensor's pages once it has been used (see MappedFile::release).
  void release(const SafeTensor& t) const { file_->release(t.data, t.n_bytes); }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, SafeTensor> tensors_;
};

// Copies n elements starting at element `offset` of a tensor into f32.
void safetensor_to_f32(const SafeTensor& t, uint64_t offset, uint64_t n, float* out);

}  // namespace strata
