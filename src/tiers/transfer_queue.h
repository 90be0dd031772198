// One persistent worker that moves data between tiers in the background (flash -> RAM now,
// RAM -> VRAM next): work is queued in order and each submission returns a ticket to wait
// for. Replaces a thread per layer per token (the look-ahead's). A failed job's exception is
// kept and rethrown by wait() for its ticket.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace strata {

class TransferQueue {
 public:
  using Ticket = uint64_t;
  TransferQueue();
  ~TransferQueue();  // finishes what is queued
  TransferQueue(const TransferQueue&) = delete;
  TransferQueue& operator=(const TransferQueue&) = delete;

  Ticket submit(std::function<void()> job);
  // Until the job of `ticket` (and every job before it) is done; rethrows its exception.
  void wait(Ticket ticket);
  bool done(Ticket ticket) const;

 private:
  void worker();
  mutable std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<std::pair<Ticket, std::function<void()>>> jobs_;
  std::deque<std::pair<Ticket, std::exception_ptr>> failures_;
  Ticket submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata
