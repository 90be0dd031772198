// httplib's task queue with as many threads as the work in flight needs, up to a maximum:
// a thread is started when a task arrives and none is idle. The server bounds the requests in
// flight itself (slots plus the queue limit; more get 503 at once), so the maximum only has to
// leave room for those and the cheap requests beside them.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

// The nice value of the pool's threads, relative to the process (the engine's threads keep 0).
constexpr int kConnectionNice = 10;

class ElasticPool final : public httplib::TaskQueue {
 public:
  // before_shutdown runs first thing in shutdown(), while the pool still takes tasks.
  explicit ElasticPool(size_t max_threads, std::function<void()> before_shutdown = {});
  ~ElasticPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins every thread
  size_t threads() const;
  size_t busy() const;

 private:
  void work();

  const size_t max_threads_;
  std::function<void()> before_shutdown_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace strata
