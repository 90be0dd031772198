#include "server/elastic_pool.h"

#include <sys/resource.h>
#include <cerrno>
#include <unistd.h>

#include <utility>

namespace strata {

ElasticPool::ElasticPool(size_t max_threads, std::function<void()> before_shutdown)
    : max_threads_(max_threads < 1 ? 1 : max_threads),
      before_shutdown_(std::move(before_shutdown)) {}

ElasticPool::~ElasticPool() {
  shutdown();
}

void ElasticPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lock(m_);
    if (shutdown_) return;
    tasks_.push_back(std::move(fn));
    // A new thread only when every thread is busy with earlier tasks.
    if (idle_ < tasks_.size() && threads_.size() < max_threads_)
      threads_.emplace_back([this] { work(); });
  }
  cv_.notify_one();
}

void ElasticPool::shutdown() {
  if (before_shutdown_) std::exchange(before_shutdown_, nullptr)();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(m_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t ElasticPool::threads() const {
  std::lock_guard lock(m_);
  return threads_.size();
}

size_t ElasticPool::busy() const {
  std::lock_guard lock(m_);
  return threads_.size() > idle_ ? threads_.size() - idle_ : 0;
}

void ElasticPool::work() {
  // Connections are served a little below the engine's threads: reading, checking and refusing
  // what clients send yields to generation when both want the CPU, so a client sending costly
  // refusals cannot take the cores from everyone's tokens (Linux: nice is per thread).
  errno = 0;
  const int process_nice = ::getpriority(PRIO_PROCESS, 0);
  if (errno == 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), process_nice + kConnectionNice);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(m_);
      ++idle_;
      cv_.wait(lock, [this] { return shutdown_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // shut down with nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace strata
