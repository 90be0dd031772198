// Helpers shared by the fuzz targets: inputs as files (the readers take paths), and the tiny
// fixtures the targets need, made at start-up so nothing outside the repository is read.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace strata::fuzz {

// The input as an anonymous in-memory file, reachable by path (/proc/self/fd/N).
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(::memfd_create("fuzz", MFD_CLOEXEC)) {
    size_t done = 0;
    while (fd_ >= 0 && done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// A fresh directory under $TMPDIR (or /tmp) for one fuzzing process.
inline std::string scratch_dir(const char* name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp ? tmp : "/tmp") + "/strata-fuzz-" + name + "-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

}  // namespace strata::fuzz
