// Zero-filled memory straight from the kernel (mmap), advised for transparent huge pages, and
// populated (every page faulted in) on request by several threads. For the KV cache: a
// std::vector's zeros came from calloc's untouched pages, so decode faulted in every new
// position's rows, 4 KiB at a time (7B: 258 faults and 1 MB of page zeroing per token, 48-70
// us per layer and token on the development VM); populated up front, as llama.cpp clears its
// cache buffer at start, decode only writes.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace strata {

class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  explicit AnonymousMemory(uint64_t bytes);  // throws std::bad_alloc when the kernel refuses
  ~AnonymousMemory();
  AnonymousMemory(AnonymousMemory&& other) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;

  // Faults every page in now (zeroed by the kernel), split over the pool's threads. Check
  // available() first: the kernel answers memory it cannot give with the OOM killer, not an
  // error.
  void populate(ThreadPool& pool);

  // Bytes this process can still get: the system's MemAvailable, or less under a cgroup v2
  // memory.max; UINT64_MAX when neither can be read.
  static uint64_t available();

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace strata
