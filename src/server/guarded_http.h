// cpp-httplib's Server with the connection handling a public server needs, which Debian's
// httplib 0.11 lacks:
//   - a deadline for receiving each request (request line, headers and body) measured from its
//     first byte, so a client that trickles one byte every few seconds cannot hold a worker
//     (httplib's read timeout restarts at every byte);
//   - a byte budget per request however its body is encoded (a backstop under the body limit);
//   - limits on the request head (its size, a line's, the header count: 431), checked on its
//     bytes before httplib builds anything from them;
//   - one read buffer per connection, so pipelined requests are all answered (httplib made a
//     new buffer per request and dropped what the client had already sent);
//   - the listening socket without SO_REUSEPORT, so a second server on a busy port fails to
//     bind instead of sharing its traffic, and a listen backlog larger than httplib's 5;
//   - connections waiting for their next request (keep-alive, or just opened) parked on one
//     poller thread (connection_poller.h) instead of each holding a worker, and workers started
//     as requests need them (elastic_pool.h): idle clients, however many, never keep a request
//     from a worker.
// Handlers and routing are httplib's; only the socket loop around process_request() is ours.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "server/connection_poller.h"
#include "server/elastic_pool.h"

namespace strata {

struct ConnectionLimits {
  std::chrono::milliseconds receive_timeout{10000};  // first byte of a request .. its last
  std::chrono::milliseconds idle_timeout{5000};      // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30000};    // one send() making no progress
  size_t max_requests_per_connection = 100;
  size_t max_request_bytes = size_t{9} << 20;  // request line + headers + body, as sent
  // The request head (request line and headers) as nginx bounds it (large_client_header_buffers
  // 4 8k): checked on the bytes before httplib parses them, so a head of many tiny headers
  // (each a map node of ~150 bytes: 22x its size) is refused (431) before anything is built.
  size_t max_head_bytes = size_t{32} << 10;
  size_t max_header_line_bytes = size_t{8} << 10;
  size_t max_headers = 100;
  int listen_backlog = 512;
  int worker_threads = 512;  // requests served at once, threads started as needed
};

struct ConnectionStats {
  size_t parked = 0;   // connections waiting for their next request, off the workers
  size_t workers = 0;  // threads started
  size_t busy = 0;     // threads serving a request now
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits);

  // Binds like httplib, then widens the listen backlog. False when the address is in use.
  bool bind(const std::string& host, int port);
  int bind_any(const std::string& host);

  // For handlers, on the worker thread serving the request: close the connection after this
  // response (its body was not read to the end, so the stream is not at a request boundary);
  // the response says so ("Connection: close").
  static void close_after_response(httplib::Response& res);
  // For handlers: whether the client of the request being served has reset its connection
  // (nginx's 499): its turn to generate is then skipped, or its generation stopped, instead of
  // computing for nobody while live requests wait. A half-close (the client's FIN) is not a
  // disconnect: it may still read the answer.
  static bool client_gone();
  // Whether that client has sent its FIN: it may still read (a half-close) or be gone for good;
  // only a write tells which (a gone client answers it with a reset, which client_gone() sees).
  static bool client_half_closed();

  // Serves the connected socket `sock` on the calling thread until it closes, then closes it,
  // without a listening socket (the fuzzer and tests feed requests through a socketpair).
  void serve_connection(socket_t sock);
  ConnectionStats stats() const;
  // The body of the server's own refusals (a head over its limits), given status and message;
  // set by the API so that they are in its error format.
  void set_refusal_body(std::function<std::string(int, const std::string&)> body) {
    refusal_body_ = std::move(body);
  }
  ~GuardedServer() override;

 private:
  struct Connection;
  bool process_and_close_socket(socket_t sock) override;
  // Serves requests of `c` while they come without waiting (`readable`: its socket has data),
  // then parks it; closes it when it ends.
  void serve(std::unique_ptr<Connection> c, bool readable);
  void park(std::unique_ptr<Connection> c);
  void widen_backlog();
  // Answers `status` with `message` and ends the connection (the rest of the request unread).
  void refuse(Connection& c, int status, const std::string& message);

  ConnectionLimits limits_;
  std::atomic<bool> direct_{false};  // serve_connection(): no listening socket to watch
  std::unique_ptr<ConnectionPoller> poller_;
  std::atomic<ElasticPool*> pool_{nullptr};  // the task queue of the listen() under way
  std::function<std::string(int, const std::string&)> refusal_body_;
};

}  // namespace strata
