#include "server/connection_poller.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/error.h"

namespace strata {

ConnectionPoller::ConnectionPoller()
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)), event_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (epoll_ < 0 || event_ < 0) fail("cannot create the connection poller (epoll, eventfd)");
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = event_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, event_, &e);
  thread_ = std::thread([this] { run(); });
}

ConnectionPoller::~ConnectionPoller() {
  stop();
  ::close(epoll_);
  ::close(event_);
}

void ConnectionPoller::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(event_, &one, sizeof(one));
}

void ConnectionPoller::park(int fd, Clock::time_point deadline, Ready ready) {
  {
    std::lock_guard lock(m_);
    if (!stopped_) {
      epoll_event e{};
      e.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
      e.data.fd = fd;
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e) == 0) {
        parked_[fd] = {deadline, std::move(ready)};
        wake();  // the nearest deadline may have changed
        return;
      }
    }
  }
  ready(false);
}

void ConnectionPoller::stop() {
  {
    std::lock_guard lock(m_);
    if (stopped_) return;
    stopped_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

size_t ConnectionPoller::parked() const {
  std::lock_guard lock(m_);
  return parked_.size();
}

void ConnectionPoller::run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    int timeout_ms = 1000;
    {
      std::lock_guard lock(m_);
      if (stopped_) break;
      const auto now = Clock::now();
      for (const auto& [fd, p] : parked_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - now);
        timeout_ms =
            std::min<int>(timeout_ms, static_cast<int>(std::max<int64_t>(0, left.count() + 1)));
      }
    }
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    std::vector<std::pair<Ready, bool>> due;
    {
      std::lock_guard lock(m_);
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == event_) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(event_, &count, sizeof(count));
          continue;
        }
        const auto it = parked_.find(fd);
        if (it == parked_.end()) continue;
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        due.emplace_back(std::move(it->second.ready), true);
        parked_.erase(it);
      }
      const auto now = Clock::now();
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (it->second.deadline > now) {
          ++it;
          continue;
        }
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
        due.emplace_back(std::move(it->second.ready), false);
        it = parked_.erase(it);
      }
    }
    for (auto& [ready, readable] : due) ready(readable);
  }
  // Stopped: nothing stays parked.
  std::map<int, Parked> left;
  {
    std::lock_guard lock(m_);
    left.swap(parked_);
  }
  for (auto& [fd, p] : left) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    p.ready(false);
  }
}

}  // namespace strata
