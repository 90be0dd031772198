// A read-only memory mapping of a whole file. Model weights are used in place from the mapping,
// so loading costs no copy and the page cache is shared between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace strata
