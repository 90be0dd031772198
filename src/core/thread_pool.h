// One persistent pool of worker threads for the whole process. parallel_for cuts task indices
// [0, n) into contiguous chunks, a few per thread, which the threads claim as they go: the
// chunks depend only on n and the thread count, and each task's arithmetic on neither, so
// results never depend on which thread ran what. A thread the OS preempts (a compiler on the
// other core) then costs the chunks it holds, not a fixed share every other thread waits for:
// fixed shares made 32 clients 4-8x slower with one compiler beside the server.
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
  // A thread may be called for several ranges (thread_index: for per-thread scratch only).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

  // The same over n items of uneven cost, cut into chunks of about equal weight:
  // `cumulative[i]` is the weight of items [0, i] (non-decreasing, n entries). The chunks
  // depend only on the weights and the thread count.
  void parallel_for_weighted(std::span<const int64_t> cumulative,
                             const std::function<void(int64_t, int64_t, int)>& fn);

  // Calls fn(thread_index) once on every thread.
  void run_on_all(const std::function<void(int)>& fn);

 private:
  // A parallel_for's chunks: chunk c covers [bounds(c), bounds(c + 1)).
  struct ChunkJob {
    int64_t chunks = 0;
    const std::function<int64_t(int64_t)>* bounds = nullptr;
    const std::function<void(int64_t, int64_t, int)>* fn = nullptr;
    uint32_t id = 0;  // tags claims_: a thread late for a job claims nothing from the next
  };

  void worker_loop(int index);
  // Runs the chunks on every thread that comes, each claiming the next unclaimed one; returns
  // once all are done, without waiting for a thread that claimed none (preempted, asleep).
  void run_chunks(int64_t chunks, const std::function<int64_t(int64_t)>& bounds,
                  const std::function<void(int64_t, int64_t, int)>& fn);
  // Claims and runs chunks of `job` (a copy taken under the mutex) until none is left.
  void claim_chunks(const ChunkJob& job, int thread);
  void wait_for_workers();  // until pending_ is 0: spin, then sleep on done_
  void wait_for_chunks(int64_t chunks);  // until chunks_done_ is `chunks`: the same

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  int spin_iterations_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // The job published at generation_ (under mutex_): once per thread (job_), or chunks.
  const std::function<void(int)>* job_ = nullptr;
  ChunkJob chunk_job_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> claims_{0};  // (job id << 32) | next chunk
  std::atomic<int64_t> chunks_done_{0};
  uint32_t next_job_id_ = 0;
  bool stop_ = false;
};

}  // namespace strata
