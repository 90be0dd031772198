// One persistent pool of worker threads for the whole process. parallel_for hands out task
// indices [0, n) in fixed contiguous ranges per thread, so which thread computes what depends
// only on n and the thread count, and each task's arithmetic never depends on either.
// Workers spin briefly after a job (decode issues hundreds of jobs per token) and then sleep;
// the caller waits for them the same way. With more threads than cores nobody spins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint ranges covering [0, n); returns when all done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

  // The same over n items of uneven cost, split so each thread's share of the total weight is
  // about equal: `cumulative[i]` is the weight of items [0, i] (non-decreasing, n entries).
  // The split depends only on the weights and the thread count.
  void parallel_for_weighted(std::span<const int64_t> cumulative,
                             const std::function<void(int64_t, int64_t, int)>& fn);

  // Calls fn(thread_index) once on every thread.
  void run_on_all(const std::function<void(int)>& fn);

 private:
  void worker_loop(int index);
  void wait_for_workers();  // until pending_ is 0: spin, then sleep on done_

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  int spin_iterations_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
};

}  // namespace strata
