#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace strata {

int open_regular_file(const std::string& path, int extra_flags, uint64_t* size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
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
  if (size != nullptr) *size = static_cast<uint64_t>(st.st_size);
  // Back to blocking reads (regular files never block, but O_DIRECT callers expect plain I/O).
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const char* what) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, 0, &size);
  if (size > max_bytes) {
    ::close(fd);
    fail("'{}' has {} bytes, more than the {} bytes strata reads as {}", path, size, max_bytes,
         what);
  }
  std::string out(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      fail("cannot read '{}': {}", path, err ? std::strerror(err) : "the file shrank");
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return out;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void refuse_special_output(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail("'{}' exists and is not a regular file; strata writes only regular files", path);
}

void write_text_file(const std::string& path, const std::string& text) {
  refuse_special_output(path);
  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) fail("cannot create '{}': {}", path, std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (std::fclose(out) != 0 || !ok) fail("cannot write '{}': {}", path, std::strerror(errno));
}

}  // namespace strata
