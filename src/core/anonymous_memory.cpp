#include "core/anonymous_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <new>
#include <string>
#include <utility>

namespace strata {

AnonymousMemory::AnonymousMemory(uint64_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: fine if the kernel says no
  data_ = static_cast<uint8_t*>(p);
}

void AnonymousMemory::populate(ThreadPool& pool) {
  constexpr uint64_t kPiece = uint64_t{2} << 20;  // a huge page
  const int64_t pieces = static_cast<int64_t>((size_ + kPiece - 1) / kPiece);
  std::atomic<bool> out_of_memory{false};
  pool.parallel_for(pieces, [&](int64_t p0, int64_t p1, int) {
    const uint64_t begin = static_cast<uint64_t>(p0) * kPiece;
    const uint64_t end = std::min(size_, static_cast<uint64_t>(p1) * kPiece);
#ifdef MADV_POPULATE_WRITE
    if (::madvise(data_ + begin, end - begin, MADV_POPULATE_WRITE) == 0) return;
    if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON) {
      out_of_memory = true;  // reported below: no exception may leave a pool thread
      return;
    }
#endif
    // Kernels before 5.14: touch each page (it is zero already; the write faults it in).
    for (uint64_t at = begin; at < end; at += 4096) data_[at] = 0;
  });
  if (out_of_memory) throw std::bad_alloc();
}

namespace {

// The first number after `key` in the file (e.g. "MemAvailable:" in /proc/meminfo), or -1.
int64_t read_number(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string word;
  while (in >> word)
    if (key.empty() || word == key) {
      int64_t v = -1;
      if (!(in >> v)) return -1;
      return v;
    }
  return -1;
}

}  // namespace

uint64_t AnonymousMemory::available() {
  uint64_t best = UINT64_MAX;
  const int64_t kib = read_number("/proc/meminfo", "MemAvailable:");
  if (kib >= 0) best = static_cast<uint64_t>(kib) * 1024;
  // The memory cgroup's limit less its usage. v2: "0::/path" in /proc/self/cgroup, memory.max
  // ("max" when unlimited: no number) and memory.current; v1: "N:memory:/path",
  // memory.limit_in_bytes and memory.usage_in_bytes.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    std::string limit_file, usage_file;
    if (line.rfind("0::", 0) == 0) {
      const std::string dir = "/sys/fs/cgroup" + line.substr(3);
      limit_file = dir + "/memory.max", usage_file = dir + "/memory.current";
    } else if (const size_t at = line.find(":memory:"); at != std::string::npos) {
      const std::string dir = "/sys/fs/cgroup/memory" + line.substr(at + 8);
      limit_file = dir + "/memory.limit_in_bytes", usage_file = dir + "/memory.usage_in_bytes";
    } else {
      continue;
    }
    const int64_t limit = read_number(limit_file, "");
    const int64_t usage = read_number(usage_file, "");
    if (limit >= 0 && usage >= 0)
      best = std::min(best, limit > usage ? static_cast<uint64_t>(limit - usage) : 0);
  }
  return best;
}

AnonymousMemory::~AnonymousMemory() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace strata
