// A mutex that admits its waiters in the order they arrived (a ticket lock that sleeps). The
// server's requests take turns generating with it: with std::mutex, clients that keep coming
// back (a stream started and dropped, again and again) could take every turn while another
// request waited for seconds (the soak test measured it under ThreadSanitizer's slowdown).
// Usable with std::lock_guard / std::unique_lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace strata {

class FifoMutex {
 public:
  void lock() {
    std::unique_lock<std::mutex> l(m_);
    const uint64_t ticket = next_++;
    turn_changed_.wait(l, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> l(m_);
      ++serving_;
    }
    turn_changed_.notify_all();
  }
  // How many lock() calls have taken a ticket so far (tests wait on it to order arrivals).
  uint64_t arrivals() {
    std::lock_guard<std::mutex> l(m_);
    return next_;
  }

 private:
  std::mutex m_;
  std::condition_variable turn_changed_;
  uint64_t next_ = 0;     // the ticket the next arrival takes
  uint64_t serving_ = 0;  // the ticket whose turn it is
};

}  // namespace strata
