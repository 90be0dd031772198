#include "backends/cuda/device_pool.h"

#include <algorithm>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_POOL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_POOL_ASAN 1
#endif
#if defined(STRATA_POOL_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace strata {

namespace {

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

DevicePool::DevicePool(uint64_t limit, bool whole, DeviceDriver driver, bool host_memory)
    : limit_(limit / kDeviceGranule * kDeviceGranule),
      driver_(std::move(driver)),
      host_memory_(host_memory) {
  if (!whole || limit_ == 0) return;
  uint8_t* base = driver_.reserve(limit_);
  if (base == nullptr) return;  // allocate() then grows as far as the driver lets it
  Chunk c{base, limit_, true, {}};
  c.free.emplace(0, limit_);
  poison(base, limit_, true);
  chunks_.push_back(std::move(c));
  held_ = limit_;
}

DevicePool::~DevicePool() {
  for (const Chunk& c : chunks_) {
    poison(c.base, c.bytes, false);
    driver_.free(c.base);
  }
}

void DevicePool::poison([[maybe_unused]] uint8_t* p, [[maybe_unused]] uint64_t bytes,
                        [[maybe_unused]] bool on) const {
#if defined(STRATA_POOL_ASAN)
  if (!host_memory_ || bytes == 0) return;
  if (on)
    __asan_poison_memory_region(p, bytes);
  else
    __asan_unpoison_memory_region(p, bytes);
#endif
}

uint8_t* DevicePool::take(Chunk& c, uint64_t bytes) {
  for (auto it = c.free.begin(); it != c.free.end(); ++it) {
    if (it->second < bytes) continue;
    const uint64_t offset = it->first, size = it->second;
    c.free.erase(it);
    if (size > bytes) c.free.emplace(offset + bytes, size - bytes);
    return c.base + offset;
  }
  return nullptr;
}

uint8_t* DevicePool::allocate(uint64_t request) {
  const uint64_t bytes = round_up(std::max<uint64_t>(request, 1), kDeviceAlignment);
  uint8_t* p = nullptr;
  for (Chunk& c : chunks_)
    if ((p = take(c, bytes)) != nullptr) break;
  if (p == nullptr) {
    const uint64_t chunk = round_up(bytes, kDeviceGranule);
    if (held_ + chunk > limit_) return nullptr;
    uint8_t* base = driver_.reserve(chunk);
    if (base == nullptr) return nullptr;
    Chunk c{base, chunk, false, {}};
    c.free.emplace(0, chunk);
    poison(base, chunk, true);
    chunks_.push_back(std::move(c));
    held_ += chunk;
    p = take(chunks_.back(), bytes);
  }
  live_.emplace(p, bytes);
  in_use_ += bytes;
  poison(p, request, false);  // the alignment's padding stays poisoned
  return p;
}

void DevicePool::release(uint8_t* p) {
  if (p == nullptr) return;
  const auto live = live_.find(p);
  if (live == live_.end()) return;
  const uint64_t bytes = live->second;
  live_.erase(live);
  in_use_ -= bytes;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (p < c.base || p >= c.base + c.bytes) continue;
    poison(p, bytes, true);
    uint64_t offset = static_cast<uint64_t>(p - c.base), size = bytes;
    // Merge with the free neighbours on either side.
    auto next = c.free.lower_bound(offset);
    if (next != c.free.end() && next->first == offset + size) {
      size += next->second;
      next = c.free.erase(next);
    }
    if (next != c.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        c.free.erase(prev);
      }
    }
    c.free.emplace(offset, size);
    if (!c.keep && size == c.bytes) {  // empty: back to the driver
      poison(c.base, c.bytes, false);
      driver_.free(c.base);
      held_ -= c.bytes;
      chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return;
  }
}

uint64_t DevicePool::largest_free() const {
  uint64_t most = limit_ > held_ ? (limit_ - held_) / kDeviceGranule * kDeviceGranule : 0;
  for (const Chunk& c : chunks_)
    for (const auto& [offset, size] : c.free) most = std::max(most, size);
  return most;
}

}  // namespace strata
