#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "core/mapping_faults.h"

namespace strata {

namespace {

// Reads the file, except the holes, into fresh anonymous memory; returns it or fails
// (unmapping on error). The file is read in 64 MiB pieces by several threads at once: most of
// the time goes to the kernel providing and zeroing the fresh pages and to copying from the
// page cache, both of which scale with cores (7B Q4_0, 3.8 GB, in the page cache: 9.0 s on one
// thread of the 2-core VM).
void* read_into_memory(int fd, uint64_t size, const std::string& path, MappedFile::Ranges holes) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail("cannot allocate {} bytes for '{}': {}", size, path, std::strerror(errno));
  ::madvise(p, size, MADV_HUGEPAGE);  // advisory: fine if the kernel says no
  // The pieces: [0, size) minus the holes, cut at 64 MiB.
  std::sort(holes.begin(), holes.end());
  constexpr uint64_t kPiece = uint64_t{64} << 20;
  std::vector<std::pair<uint64_t, uint64_t>> pieces;  // (offset, bytes)
  uint64_t at = 0;
  auto add = [&](uint64_t end) {
    for (; at < end; at = std::min(end, at + kPiece))
      pieces.emplace_back(at, std::min(end, at + kPiece) - at);
  };
  for (const auto& [offset, bytes] : holes) {
    add(std::min(size, offset));
    at = std::max(at, std::min(size, offset + bytes));
  }
  add(size);

  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::string error;  // the first failure, if any
  auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      uint64_t done = pieces[i].first;
      const uint64_t end = done + pieces[i].second;
      while (done < end) {
        const ssize_t n =
            ::pread(fd, static_cast<uint8_t*>(p) + done, end - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          const int err = n < 0 ? errno : 0;
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error.empty())
            error = fmt::format("cannot read '{}' at byte {}: {}", path, done,
                                err ? std::strerror(err) : "file shrank");
          next = pieces.size();  // the others stop too
          return;
        }
        // With holes (a model under a RAM budget) the page cache's copy of what was read is
        // dropped: it would otherwise count against a memory cgroup next to the anonymous
        // copy.
        if (!holes.empty()) ::posix_fadvise(fd, static_cast<off_t>(done), n, POSIX_FADV_DONTNEED);
        done += static_cast<uint64_t>(n);
      }
    }
  };
  const unsigned threads = std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < std::min<uint64_t>(threads, pieces.size()); ++t)
    helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  if (!error.empty()) {
    ::munmap(p, size);
    fail("{}", error);
  }
  ::mprotect(p, size, PROT_READ);
  return p;
}

}  // namespace

MappedFile::MappedFile(const std::string& path, LoadMode mode, const Ranges& holes)
    : path_(path), mode_(mode) {
  const int fd = open_regular_file(path, 0, &size_);
  if (size_ > 0) {
    void* p = nullptr;
    try {
      if (mode == LoadMode::Read) {
        p = read_into_memory(fd, size_, path, holes);
      } else {
        p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) fail("cannot map '{}': {}", path, std::strerror(errno));
        watch_mapping(p, size_, path);  // a truncation later is a message, not a silent SIGBUS
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

void MappedFile::release(const uint8_t* p, uint64_t n) const {
  if (mode_ != LoadMode::Map || data_ == nullptr || n == 0) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // Only whole pages inside the range: neighbours may still be needed.
  const uint64_t begin = (static_cast<uint64_t>(p - data_) + page - 1) / page * page;
  const uint64_t end = (static_cast<uint64_t>(p - data_) + n) / page * page;
  if (end > begin) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

bool MappedFile::set_writable() {
  if (mode_ != LoadMode::Read || data_ == nullptr) return false;
  if (::mprotect(const_cast<uint8_t*>(data_), size_, PROT_READ | PROT_WRITE) != 0)
    fail("cannot make the copy of '{}' writable: {}", path_, std::strerror(errno));
  return true;
}

void MappedFile::set_read_only() {
  if (mode_ == LoadMode::Read && data_ != nullptr)
    ::mprotect(const_cast<uint8_t*>(data_), size_, PROT_READ);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && mode_ == LoadMode::Map) unwatch_mapping(data_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace strata
