#include "server/guarded_http.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_close_after_response = false;
thread_local int t_connection = -1;  // the socket this worker thread is serving

// Waits until `fd` is ready for `events` or `timeout` passes; true when ready.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// A connection's socket as httplib's Stream. Its read buffer lives as long as the connection
// (pipelined requests stay in it). Reads fail once the current request's deadline or byte
// budget is spent; writes fail when the client accepts nothing for write_timeout.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}

  // Starts the receive clock and budget of the next request.
  void start_request() {
    deadline_ = Clock::now() + limits_.receive_timeout;
    budget_ = limits_.max_request_bytes;
  }
  bool has_buffered() const { return begin_ < buffer_.size(); }
  // Frees the buffer of a connection with nothing buffered (parked ones hold no memory).
  void release_buffer() {
    if (has_buffered()) return;
    std::string().swap(buffer_);
    begin_ = 0;
  }

  enum class Head { Complete, Ended, LineTooLong, TooLarge, TooManyHeaders };
  // Receives the request head (request line, headers, blank line) into the buffer without
  // consuming it, and checks it against the limits, reading lines as httplib does (a line ends
  // at '\n'; the head at a line that is exactly "\r\n"). Ended: the client stopped (EOF,
  // deadline) before the head was whole, which httplib then answers as it would.
  Head receive_head() {
    size_t line_start = begin_, lines = 0;
    size_t scanned = begin_;
    for (;;) {
      for (; scanned < buffer_.size(); ++scanned) {
        if (buffer_[scanned] != '\n') continue;
        const size_t length = scanned + 1 - line_start;
        if (lines > 0 && length == 2 && buffer_[line_start] == '\r') return Head::Complete;
        if (length > limits_.max_header_line_bytes && lines > 0) return Head::LineTooLong;
        if (++lines > limits_.max_headers + 1) return Head::TooManyHeaders;
        line_start = scanned + 1;
      }
      const size_t head = buffer_.size() - begin_;
      if (head >= limits_.max_head_bytes) return Head::TooLarge;
      if (lines > 0 && buffer_.size() - line_start > limits_.max_header_line_bytes)
        return Head::LineTooLong;
      if (!append(limits_.max_head_bytes - head)) return Head::Ended;
    }
  }
  // Waits for the next request's first byte for at most `timeout`.
  bool wait_for_request(std::chrono::milliseconds timeout) const {
    return has_buffered() || wait_for(fd_, POLLIN, timeout);
  }

  bool is_readable() const override { return has_buffered() || wait_for(fd_, POLLIN, left()); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, limits_.write_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (budget_ == 0) return -1;
    if (!has_buffered() && !fill()) return -1;
    const size_t n = std::min({size, buffer_.size() - begin_, budget_});
    std::copy_n(buffer_.data() + begin_, n, ptr);
    begin_ += n;
    budget_ -= n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (!wait_for(fd_, POLLOUT, limits_.write_timeout)) return -1;
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  std::chrono::milliseconds left() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  }
  // One recv() into the empty buffer, within the deadline; false on timeout, EOF or error.
  bool fill() {
    buffer_.clear();
    begin_ = 0;
    return append(kReadBytes);
  }
  // One recv() of at most `most` bytes (kReadBytes at most) after what the buffer holds (its
  // consumed part dropped first), within the deadline; false on timeout, EOF or error.
  bool append(size_t most) {
    buffer_.erase(0, begin_);
    begin_ = 0;
    const size_t kept = buffer_.size();
    buffer_.resize(kept + std::min(most, kReadBytes));
    for (;;) {
      if (left().count() <= 0 || !wait_for(fd_, POLLIN, left())) break;
      const ssize_t n = ::recv(fd_, buffer_.data() + kept, buffer_.size() - kept, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      buffer_.resize(kept + static_cast<size_t>(n));
      return true;
    }
    buffer_.resize(kept);
    return false;
  }

  static constexpr size_t kReadBytes = 16384;

  int fd_;
  const ConnectionLimits& limits_;
  std::string buffer_;
  size_t begin_ = 0;  // first unread byte of buffer_
  Clock::time_point deadline_{};
  size_t budget_ = 0;
};

// The keep-alive wait for the next request, in slices so that stop() (which invalidates the
// listening socket) does not wait out an idle connection.
bool wait_for_next_request(const ConnectionStream& stream, const std::atomic<socket_t>& listening,
                           const std::atomic<bool>& direct, std::chrono::milliseconds idle) {
  const auto end = Clock::now() + idle;
  while (direct || listening != INVALID_SOCKET) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) return false;
    if (stream.wait_for_request(std::min(left, std::chrono::milliseconds(100)))) return true;
  }
  return false;
}

// A response was sent while the client may still be sending the request it answers (a body
// refused unread): closing now would reset the connection, and the client, still writing,
// would lose the response. Like nginx's lingering close: stop writing, then read and drop
// what comes for a bounded time and size, so the client sees the reply and then the end.
void linger(int fd, const ConnectionLimits& limits) {
  ::shutdown(fd, SHUT_WR);
  const auto end = Clock::now() + std::min(limits.receive_timeout, std::chrono::milliseconds(2000));
  size_t left = limits.max_request_bytes;
  char scratch[16384];
  while (left > 0) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (wait.count() <= 0 || !wait_for(fd, POLLIN, wait)) return;
    const ssize_t n = ::recv(fd, scratch, std::min(sizeof(scratch), left), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

struct GuardedServer::Connection {
  Connection(int fd, const ConnectionLimits& limits) : fd(fd), stream(fd, limits) {}
  ~Connection() {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  int fd;
  ConnectionStream stream;
  size_t served = 0;
};

GuardedServer::GuardedServer(ConnectionLimits limits)
    : limits_(limits), poller_(std::make_unique<ConnectionPoller>()) {
  const auto workers = static_cast<size_t>(limits_.worker_threads);
  new_task_queue = [this, workers] {
    // When listen() ends: no more hand-overs to this pool, and parked connections close now
    // rather than at their deadline.
    auto* pool = new ElasticPool(workers, [this] {
      pool_ = nullptr;
      poller_->stop();
    });
    pool_ = pool;
    return pool;
  };
  // httplib's default sets SO_REUSEPORT, with which a second server binds the same port.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

GuardedServer::~GuardedServer() {
  poller_->stop();
}

ConnectionStats GuardedServer::stats() const {
  ConnectionStats s;
  s.parked = poller_->parked();
  if (ElasticPool* pool = pool_.load()) {
    s.workers = pool->threads();
    s.busy = pool->busy();
  }
  return s;
}

void GuardedServer::widen_backlog() {
  // Calling listen() again on a listening socket sets its backlog (Linux).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, limits_.listen_backlog);
}

bool GuardedServer::bind(const std::string& host, int port) {
  if (!bind_to_port(host, port)) return false;
  widen_backlog();
  return true;
}

int GuardedServer::bind_any(const std::string& host) {
  const int port = bind_to_any_port(host);
  if (port > 0) widen_backlog();
  return port;
}

void GuardedServer::close_after_response(httplib::Response& res) {
  res.set_header("Connection", "close");
  t_close_after_response = true;
}

bool GuardedServer::client_gone() {
  if (t_connection < 0) return false;
  // A reset (POLLERR, POLLHUP) only. A FIN is not a disconnect: a client that half-closes after
  // sending its request (shutdown(SHUT_WR), as `nc -N` and some proxies do) still reads the
  // answer. A client that closed for good is found by its reset, which the next write draws.
  pollfd p{t_connection, 0, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

bool GuardedServer::client_half_closed() {
  if (t_connection < 0) return false;
  pollfd p{t_connection, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLRDHUP) != 0;
}

void GuardedServer::serve_connection(socket_t sock) {
  direct_ = true;
  process_and_close_socket(sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  // A new connection: its first request may not have begun (a client that connects and
  // waits): it is parked like a kept-alive one unless bytes are already there.
  serve(std::make_unique<Connection>(sock, limits_), false);
  return true;
}

void GuardedServer::refuse(Connection& c, int status, const std::string& message) {
  t_connection = -1;
  const std::string body = refusal_body_ ? refusal_body_(status, message)
                                         : nlohmann::json{{"error", {{"message", message}}}}.dump();
  const std::string reply = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: "
      "close\r\n\r\n{}",
      status, status == 431 ? "Request Header Fields Too Large" : "Error", body.size(), body);
  if (c.stream.write(reply.data(), reply.size()) >= 0) linger(c.fd, limits_);
}

void GuardedServer::park(std::unique_ptr<Connection> c) {
  const int fd = c->fd;
  // The poller's callback owns the connection: back to a worker when its next request
  // begins, closed when the keep-alive wait ends or the server stops.
  auto owned = std::make_shared<std::unique_ptr<Connection>>(std::move(c));
  poller_->park(fd, Clock::now() + limits_.idle_timeout, [this, owned](bool readable) {
    ElasticPool* pool = pool_.load();
    if (readable && pool != nullptr)
      pool->enqueue([this, owned] { serve(std::move(*owned), true); });
    // Otherwise the last owner closes it (Connection's destructor).
  });
}

void GuardedServer::serve(std::unique_ptr<Connection> c, bool readable) {
  ConnectionStream& stream = c->stream;
  t_connection = c->fd;
  for (; c->served < limits_.max_requests_per_connection; ++c->served) {
    if (!readable && !stream.has_buffered()) {
      if (!direct_) {
        t_connection = -1;
        stream.release_buffer();
        return park(std::move(c));
      }
      if (!wait_for_next_request(stream, svr_sock_, direct_, limits_.idle_timeout)) break;
    }
    readable = false;
    stream.start_request();
    t_close_after_response = false;
    switch (stream.receive_head()) {
      case ConnectionStream::Head::Complete:
      case ConnectionStream::Head::Ended:
        break;
      case ConnectionStream::Head::LineTooLong:
        return refuse(*c, 431,
                      fmt::format("a header line is over {} bytes", limits_.max_header_line_bytes));
      case ConnectionStream::Head::TooLarge:
        return refuse(
            *c, 431,
            fmt::format("the request line and headers are over {} bytes", limits_.max_head_bytes));
      case ConnectionStream::Head::TooManyHeaders:
        return refuse(*c, 431, fmt::format("the request has over {} headers", limits_.max_headers));
    }
    bool closed = false;
    const bool last = c->served + 1 == limits_.max_requests_per_connection;
    const bool ok = process_request(stream, last, closed, nullptr);
    if (!ok || closed || t_close_after_response) break;
  }
  t_connection = -1;
  if (t_close_after_response) linger(c->fd, limits_);
}

}  // namespace strata
