#include "tiers/bundle_source.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace strata {

FileBundleSource::FileBundleSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = fd_ >= 0;
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open '{}' for neuron reads: {}", path, std::strerror(errno));
    fmt::print(stderr, "note: '{}' does not allow direct I/O; neuron reads go through the page cache\n",
               path);
  }
}

FileBundleSource::~FileBundleSource() {
  if (fd_ >= 0) ::close(fd_);
}

void FileBundleSource::read(void* dst, uint64_t bytes, uint64_t offset) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + done, bytes - done,
                              static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("reading neurons from '{}' at offset {} failed: {}", path_, offset + done,
           std::strerror(errno));
    }
    if (r == 0)
      fail("'{}' ended at offset {} while reading neurons (was it truncated after loading?)",
           path_, offset + done);
    done += static_cast<uint64_t>(r);
  }
}

std::string FileBundleSource::describe() const {
  return fmt::format("{} ({})", path_, direct_ ? "direct I/O" : "buffered");
}

}  // namespace strata
