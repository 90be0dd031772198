#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace strata {

namespace {

// Reads the file, except the holes, into fresh anonymous memory; returns it or fails
// (unmapping on error).
void* read_into_memory(int fd, uint64_t size, const std::string& path, MappedFile::Ranges holes) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail("cannot allocate {} bytes for '{}': {}", size, path, std::strerror(errno));
  ::madvise(p, size, MADV_HUGEPAGE);  // advisory: fine if the kernel says no
  std::sort(holes.begin(), holes.end());
  size_t next_hole = 0;
  uint64_t done = 0;
  while (done < size) {
    // Skip a hole that starts here (or that this position is inside).
    while (next_hole < holes.size() && holes[next_hole].first + holes[next_hole].second <= done)
      ++next_hole;
    if (next_hole < holes.size() && holes[next_hole].first <= done) {
      done = std::min(size, holes[next_hole].first + holes[next_hole].second);
      continue;
    }
    uint64_t chunk = std::min<uint64_t>(size - done, uint64_t{64} << 20);
    if (next_hole < holes.size()) chunk = std::min(chunk, holes[next_hole].first - done);
    const ssize_t n = ::pread(fd, static_cast<uint8_t*>(p) + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(p, size);
      fail("cannot read '{}' at byte {}: {}", path, done, err ? std::strerror(err) : "file shrank");
    }
    // With holes (a model under a RAM budget) the page cache's copy of what was read is
    // dropped: it would otherwise count against a memory cgroup next to the anonymous copy.
    if (!holes.empty()) ::posix_fadvise(fd, static_cast<off_t>(done), n, POSIX_FADV_DONTNEED);
    done += static_cast<uint64_t>(n);
  }
  ::mprotect(p, size, PROT_READ);
  return p;
}

}  // namespace

MappedFile::MappedFile(const std::string& path, LoadMode mode, const Ranges& holes)
    : path_(path), mode_(mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat '{}': {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = nullptr;
    try {
      if (mode == LoadMode::Read) {
        p = read_into_memory(fd, size_, path, holes);
      } else {
        p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) fail("cannot map '{}': {}", path, std::strerror(errno));
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
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace strata
