// The memory the HTTP side may hold for requests at once (their bodies, and their JSON documents
// while parsed), as one hard budget counted in --ram-budget: a request reserves what it will
// hold before holding it, and a reservation that does not fit is refused (503, retry), so no mix
// of clients grows the server past the budget. Without it, eight 8 MB bodies of nested arrays
// took 4 GB.
#pragma once

#include <atomic>
#include <cstdint>

namespace strata {

class RequestMemory {
 public:
  explicit RequestMemory(uint64_t budget) : budget_(budget) {}
  uint64_t budget() const { return budget_; }
  uint64_t in_use() const { return used_.load(std::memory_order_relaxed); }

  // What one request holds, returned when it ends.
  class Reservation {
   public:
    explicit Reservation(RequestMemory& pool) : pool_(&pool) {}
    ~Reservation() { pool_->release(held_); }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    // Reserves `bytes` more; false (nothing reserved) when the budget cannot hold them now.
    bool grow(uint64_t bytes) {
      if (!pool_->take(bytes)) return false;
      held_ += bytes;
      return true;
    }
    uint64_t held() const { return held_; }

   private:
    RequestMemory* pool_;
    uint64_t held_ = 0;
  };

 private:
  bool take(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > budget_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const uint64_t budget_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace strata
