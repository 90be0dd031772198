// The HTTP layer (httplib's request parser under strata's connection loop) and the routes on
// arbitrary bytes from a client: the input is sent on one end of a socket pair whose other end
// the server serves on this thread, with the shipped model behind it (generation capped at a
// 16-token context). Any response is fine; a crash, hang or sanitizer report is not.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/session.h"
#include "server/http_server.h"

namespace {

struct Served {
  strata::ThreadPool pool{1};
  std::unique_ptr<strata::Model> model;
  std::unique_ptr<strata::Session> session;
  std::unique_ptr<strata::HttpServer> server;
};

Served& served() {
  static Served* s = [] {
    auto* p = new Served;  // lives as long as the process
    Served& x = *p;
    x.model = strata::Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf", true,
                                  strata::LoadMode::Map);
    x.session = std::make_unique<strata::Session>(*x.model, 16, x.pool);
    strata::ServerOptions o;
    o.model_name = "tiny";
    o.log_requests = false;
    o.max_body_bytes = 1 << 16;
    o.defaults.max_tokens = 4;
    o.connections.receive_timeout = std::chrono::milliseconds(2000);
    x.server = std::make_unique<strata::HttpServer>(*x.model, *x.session, o);
    return p;
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Served& s = served();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  const int big = 4 << 20;  // room for every response, so the server never waits for a reader
  ::setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fds[0], data + done, size - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  s.server->serve_connection(fds[1]);  // closes fds[1]
  char sink[65536];
  while (::recv(fds[0], sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  ::close(fds[0]);
  return 0;
}
