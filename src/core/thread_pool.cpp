#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_PAUSE() _mm_pause()
#else
#define STRATA_PAUSE() ((void)0)
#endif

namespace strata {

namespace {
// Roughly 50-100 microseconds of spinning before a worker sleeps: long enough to cover the gap
// between the matrix products of one token, short enough not to burn a core when idle.
constexpr int kSpinIterations = 20000;
// The caller spins ten times longer for its workers: a job that outlasts the spin costs a
// futex wake-up (tens of microseconds), and decode's jobs run up to a few hundred
// microseconds (a caller that slept after 20000 pauses made 1B Q4_0 decode ~4% slower).
constexpr int kCallerSpinIterations = 10 * kSpinIterations;
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      // More threads than cores: a spinning thread takes the core a working one needs (4
      // tokens took 5 s at 128 threads on 2 cores, 20 s at 512), so nobody spins.
      spin_iterations_(n_threads_ > static_cast<int>(std::thread::hardware_concurrency())
                           ? 0
                           : kSpinIterations) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    chunk_job_ = {};
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0);
  wait_for_workers();
}

void ThreadPool::wait_for_chunks(int64_t chunks) {
  const int spins = spin_iterations_ == 0 ? 0 : kCallerSpinIterations;
  for (int spin = 0; spin < spins; ++spin) {
    if (chunks_done_.load(std::memory_order_acquire) == chunks) return;
    STRATA_PAUSE();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
}

void ThreadPool::wait_for_workers() {
  const int spins = spin_iterations_ == 0 ? 0 : kCallerSpinIterations;
  for (int spin = 0; spin < spins; ++spin) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    STRATA_PAUSE();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

// A few chunks per thread: enough that a preempted thread's share is taken by the others,
// few enough that claiming them (one atomic each) stays far below a job's cost.
constexpr int64_t kChunksPerThread = 4;

void ThreadPool::run_chunks(int64_t chunks, const std::function<int64_t(int64_t)>& bounds,
                            const std::function<void(int64_t, int64_t, int)>& fn) {
  ChunkJob job{chunks, &bounds, &fn, 0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job.id = ++next_job_id_;
    if (job.id == 0) job.id = ++next_job_id_;  // 0 tags no job
    job_ = nullptr;
    chunk_job_ = job;
    chunks_done_.store(0, std::memory_order_relaxed);
    claims_.store(uint64_t{job.id} << 32, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  claim_chunks(job, 0);
  wait_for_chunks(chunks);
}

void ThreadPool::claim_chunks(const ChunkJob& job, int thread) {
  for (;;) {
    uint64_t c = claims_.load(std::memory_order_acquire);
    const uint64_t next = c & 0xffffffffu;
    if ((c >> 32) != job.id || next >= static_cast<uint64_t>(job.chunks)) return;
    // Claimed: the caller waits for this chunk, so the job's functions live until it is done.
    if (!claims_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    const auto chunk = static_cast<int64_t>(next);
    const int64_t begin = (*job.bounds)(chunk), end = (*job.bounds)(chunk + 1);
    if (begin < end) (*job.fn)(begin, end, thread);
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == job.chunks) {
      std::lock_guard<std::mutex> lock(mutex_);  // the caller may be asleep on done_
      done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int64_t threads = std::min<int64_t>(n_threads_, n);
  if (threads == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t chunks = std::min(n, threads * kChunksPerThread);
  run_chunks(chunks, [&](int64_t c) { return n * c / chunks; }, fn);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < spin_iterations_; ++spin) {
      STRATA_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    const std::function<void(int)>* job;
    ChunkJob chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      // The job of the generation read here (a later one than woke it, perhaps): taken once.
      seen = generation_.load(std::memory_order_acquire);
      job = job_;
      chunks = chunk_job_;
    }
    if (chunks.id != 0) {
      claim_chunks(chunks, index);
      continue;
    }
    (*job)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The last one: wake the caller if it stopped spinning (under the lock, so the wake-up
      // cannot fall between its check and its wait).
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for_weighted(std::span<const int64_t> cumulative,
                                       const std::function<void(int64_t, int64_t, int)>& fn) {
  const int64_t n = static_cast<int64_t>(cumulative.size());
  if (n == 0) return;
  const int64_t total = cumulative.back();
  if (n_threads_ == 1 || total <= 0) {
    parallel_for(n, fn);
    return;
  }
  // Chunk c begins at the first item whose start (the weight before it) reaches
  // c * total / chunks.
  const int64_t chunks = std::min<int64_t>(n, std::min<int64_t>(n_threads_, n) * kChunksPerThread);
  auto first_of = [&](int64_t c) {
    if (c == 0) return int64_t{0};
    if (c == chunks) return n;
    const int64_t bound = (total * c + chunks - 1) / chunks;  // ceil(c * total / chunks)
    int64_t lo = 0, hi = n;                                   // first i with start(i) >= bound
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      const int64_t start = mid == 0 ? 0 : cumulative[static_cast<size_t>(mid - 1)];
      if (start >= bound)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  run_chunks(chunks, first_of, fn);
}

}  // namespace strata
