// Idle keep-alive connections parked off the worker threads: one thread waits (epoll) on every
// parked socket until it becomes readable (its next request begins), its deadline passes, or
// the poller stops. A client that keeps a connection open between requests then holds a file
// descriptor and a little memory, never a worker that another request needs.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace strata {

class ConnectionPoller {
 public:
  using Clock = std::chrono::steady_clock;
  // ready(true): the socket is readable (or closed by the peer); ready(false): its deadline
  // passed or the poller stopped. Called once per park(), on the poller's thread: it must only
  // hand the connection on (enqueue it to a worker) or close it.
  using Ready = std::function<void(bool readable)>;

  ConnectionPoller();
  ~ConnectionPoller();  // stop()
  ConnectionPoller(const ConnectionPoller&) = delete;
  ConnectionPoller& operator=(const ConnectionPoller&) = delete;

  // Watches `fd` until it is readable or `deadline`. After stop(), calls ready(false) at once.
  void park(int fd, Clock::time_point deadline, Ready ready);
  // Ends the thread; every parked socket gets ready(false).
  void stop();
  size_t parked() const;

 private:
  struct Parked {
    Clock::time_point deadline;
    Ready ready;
  };
  void run();
  void wake();

  int epoll_ = -1, event_ = -1;
  mutable std::mutex m_;
  std::map<int, Parked> parked_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace strata
