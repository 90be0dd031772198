// A whole file's bytes in memory, read-only, in one of two ways:
//   Map:  mmap of the file; nothing is copied and the page cache is shared between runs, but
//         the weights sit in 4 KiB pages and decode pays a TLB miss every 4 KiB.
//   Read: the file is read into anonymous memory advised for transparent huge pages. Decode
//         then streams 2 MiB pages: measured 20-26% faster on 1B models (see README), at the
//         cost of reading the file at load time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata {

enum class LoadMode { Map, Read };

class MappedFile {
 public:
  // Read mode leaves `holes` ([offset, offset + size) byte ranges) unread: their memory is never
  // touched, so it costs nothing, and must not be read (a bundled model's FFN and embedding
  // table, which the flash tier reads from the file instead).
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  explicit MappedFile(const std::string& path, LoadMode mode = LoadMode::Map,
                      const Ranges& holes = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops the pages of [p, p + n) from this process (Map mode; no-op for Read): a converter
  // streaming through a file keeps only what it is working on resident.
  void release(const uint8_t* p, uint64_t n) const;

  // Read mode only: the copy in memory made writable, for in-place rearrangement of weights at
  // load (the whole range at once, so huge pages are not split); false in Map mode, whose pages
  // belong to the page cache. set_read_only() restores the protection.
  bool set_writable();
  void set_read_only();
  uint8_t* mutable_data() { return const_cast<uint8_t*>(data_); }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  LoadMode mode_ = LoadMode::Map;
};

}  // namespace strata
