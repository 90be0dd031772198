#include "tiers/transfer_queue.h"

namespace strata {

TransferQueue::TransferQueue() : thread_([this] { worker(); }) {}

TransferQueue::~TransferQueue() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

TransferQueue::Ticket TransferQueue::submit(std::function<void()> job) {
  Ticket t;
  {
    const std::lock_guard lock(mutex_);
    t = ++submitted_;
    jobs_.emplace_back(t, std::move(job));
  }
  wake_.notify_one();
  return t;
}

bool TransferQueue::done(Ticket ticket) const {
  const std::lock_guard lock(mutex_);
  return completed_ >= ticket;
}

void TransferQueue::wait(Ticket ticket) {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return completed_ >= ticket; });
  // Failures of this ticket and earlier ones are reported once, to the first waiter.
  while (!failures_.empty() && failures_.front().first <= ticket) {
    const auto [t, error] = failures_.front();
    failures_.pop_front();
    if (t == ticket) std::rethrow_exception(error);
  }
}

void TransferQueue::worker() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    auto [ticket, job] = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) failures_.emplace_back(ticket, error);
    completed_ = ticket;
    finished_.notify_all();
  }
}

}  // namespace strata
