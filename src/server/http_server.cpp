#include "server/http_server.h"

#include "server/server_impl.h"

namespace strata {

using nlohmann::json;

uint64_t server_ram_bytes(const ServerOptions& o) {
  // A worker's stack pages touched by httplib's parsing and the handlers, measured under 48 KiB.
  constexpr uint64_t kWorkerStackBytes = uint64_t{64} << 10;
  constexpr uint64_t kReadBufferBytes = uint64_t{16} << 10;
  const ConnectionLimits& c = o.connections;
  // The head as parsed: each header a map node (~150 bytes) beside its bytes.
  const uint64_t head = c.max_head_bytes + c.max_headers * 160;
  return o.request_memory_bytes +
         static_cast<uint64_t>(c.worker_threads) * (head + kReadBufferBytes + kWorkerStackBytes);
}

const std::string& HttpServer::chat_template_name() const { return impl_->chat_template().name(); }
Pooling HttpServer::pooling() const { return impl_->engine->pooling; }

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->routes();
}

HttpServer::HttpServer(const Model& model, Session& session, ServerOptions options)
    : HttpServer(std::move(options)) {
  attach(model, session);
}

void HttpServer::attach(const Model& model, Session& session, const std::string& model_name,
                        Drafter* drafter, const SpeculationParams& speculation) {
  Impl& s = *impl_;
  if (s.engine) fail("the server already serves a model");
  if (!model_name.empty()) s.options.model_name = model_name;  // no handler reads it yet
  s.options.scheduler.drafter = drafter;
  s.options.scheduler.speculation = speculation;
  s.engine = std::make_unique<ServedModel>(model, session, s.options);
  s.ready = true;  // from here on every route runs (pre_route reads it before any handler)
}

bool HttpServer::ready() const { return impl_->ready; }

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  auto& o = impl_->options;
  if (o.port == 0) {
    const int port = impl_->http.bind_any(o.host);
    if (port <= 0) fail("cannot listen on {} (any port)", o.host);
    o.port = port;
    return port;
  }
  if (!impl_->http.bind(o.host, o.port))
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port);
  return o.port;
}

void HttpServer::listen() {
  Impl& s = *impl_;
  // Watches a drain: stops the server once nothing is in flight, or at the deadline (then what
  // still runs is cancelled as by stop()).
  s.listening = true;
  std::thread watcher([this, &s] {
    std::optional<std::chrono::steady_clock::time_point> since;
    while (s.listening) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      // httplib's stop() acts only once its accept loop runs: a stop() that came before (a
      // load that failed at once, a signal at start) did nothing, and listen() never returned.
      if (s.stopping && !s.stop_reached_loop && s.http.is_running()) {
        s.stop_reached_loop = true;
        s.http.stop();
      }
      if (!s.draining || s.stopping) continue;
      const auto now = std::chrono::steady_clock::now();
      if (!since) {
        since = now;
        if (s.options.log_requests)
          fmt::print(stderr, "draining: {} requests in flight finish, new ones get 503\n",
                     s.in_flight.load());
      }
      if (s.in_flight == 0 || now - *since >= s.options.drain_timeout) {
        if (s.options.log_requests)
          fmt::print(stderr, "{}\n", s.in_flight == 0 ? "drained" : "drain timeout: cancelling the rest");
        stop();
      }
    }
  });
  s.http.listen_after_bind();
  s.listening = false;
  watcher.join();
}

void HttpServer::drain() {
  impl_->draining = true;  // only an atomic store: this runs in a signal handler
}

int HttpServer::in_flight() const { return impl_->in_flight; }

void HttpServer::stop() {
  // Only an atomic store and httplib's stop: this runs in a signal handler.
  Impl& s = *impl_;
  s.stopping = true;
  // Set only when httplib's loop already ran (then its stop() closes the socket); the listen()
  // watcher stops a loop that began after this.
  if (s.http.is_running()) s.stop_reached_loop = true;
  s.http.stop();
}

void HttpServer::serve_connection(int sock) {
  impl_->http.serve_connection(sock);
}

}  // namespace strata
