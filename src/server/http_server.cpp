#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/json_limits.h"
#include "server/chat_page.h"
#include "server/completion_stream.h"
#include "server/embeddings_api.h"
#include "server/http_rules.h"
#include "server/metrics.h"
#include "server/prompt_builder.h"
#include "server/request_intake.h"
#include "server/token_api.h"

namespace strata {

using nlohmann::json;

// What serving needs of the model: set once by attach(), when it is loaded.
struct ServedModel {
  ServedModel(const Model& m, Session& s, const ServerOptions& options)
      : model(m),
        session(s),
        chat_template(chat_template_for(m, options.chat_template)),
        pooling(options.pooling ? *options.pooling
                                : model_pooling(*m.file, m.config.architecture).value_or(Pooling::Mean)),
        scheduler(m, s, options.scheduler),
        prompts(m, chat_template, s.n_ctx()) {}
  ~ServedModel() { scheduler.stop(); }

  // --chat-template's choice, else the model's own template; a template strata cannot run
  // stops the server at start with the reason.
  static ChatTemplate chat_template_for(const Model& m, const std::string& spec) {
    const Tokenizer& tok = *m.tokenizer;
    auto text_of = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
    try {
      return ChatTemplate::select(spec, m.file->get_string("tokenizer.chat_template", ""),
                                  text_of(tok.bos()), text_of(tok.eos()));
    } catch (const std::runtime_error& e) {
      fail("{}", e.what());
    }
  }

  const Model& model;
  Session& session;
  ChatTemplate chat_template;  // chosen and checked once, at start
  Pooling pooling;             // /v1/embeddings'
  BatchScheduler scheduler;
  PromptBuilder prompts;  // over chat_template, declared before it
};

struct HttpServer::Impl {
  ServerOptions options;
  // Null until attach(); `ready` is set after it, and no route but /health and / runs before.
  std::unique_ptr<ServedModel> engine;
  std::atomic<bool> ready{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};  // stop() was called: in-flight requests end
  std::atomic<bool> draining{false};  // drain() was called: new requests get 503
  std::atomic<bool> listening{false};
  std::atomic<bool> stop_reached_loop{false};  // a stop() found httplib's accept loop running
  // API requests being served (their handler runs, or their stream is being written).
  std::atomic<int> in_flight{0};
  struct InFlight {
    explicit InFlight(std::atomic<int>& n) : n(n) { ++n; }
    ~InFlight() { --n; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    std::atomic<int>& n;
  };
  RequestMemory request_memory;
  RequestIntake intake;
  GuardedServer http;

  // A request that held this much returns its freed pages to the system when it ends.
  static constexpr uint64_t kTrimAfterBytes = uint64_t{1} << 20;

  explicit Impl(ServerOptions o)
      : options(std::move(o)),
        request_memory(options.request_memory_bytes),
        intake(options.max_body_bytes, request_memory),
        http(with_body_budget(options.connections, options.max_body_bytes)) {
    if (options.request_memory_bytes < 2 * options.max_body_bytes)
      fail("the request memory ({} bytes) must hold at least two bodies of the largest size ({})",
           options.request_memory_bytes, options.max_body_bytes);
  }
  ~Impl() {
    if (engine) engine->scheduler.stop();
  }

  const Model& model() const { return engine->model; }
  Session& session() const { return engine->session; }
  BatchScheduler& scheduler() const { return engine->scheduler; }
  const ChatTemplate& chat_template() const { return engine->chat_template; }

  // The per-request byte budget of the connection layer: the body limit plus room for the
  // request line, headers and chunk framing (the body limit itself is checked as it is read).
  static ConnectionLimits with_body_budget(ConnectionLimits c, size_t max_body) {
    c.max_request_bytes = max_body + max_body / 8 + (size_t{64} << 10);
    return c;
  }

  void reply_error(httplib::Response& res, int status, const std::string& message,
                   const std::string& param = "", const std::string& code = "") {
    res.status = status;
    res.set_content(dump_json(error_body(status, message, param, code)), "application/json");
  }

  // The answer to a request cancelled before its end: the server is stopping, or the client
  // reset its connection (then nobody reads it). Never a 200 without a body.
  void reply_cancelled(httplib::Response& res) {
    reply_error(res, 503,
                stopping ? "the server is stopping; retry on another replica or later"
                         : "the request was cancelled: the client reset its connection",
                "", "cancelled");
    GuardedServer::close_after_response(res);
  }

  void log(const httplib::Request& req, int status, const GenerationResult* r, int n = 1) {
    if (!options.log_requests) return;
    if (r == nullptr) {
      fmt::print(stderr, "{} {} -> {}\n", req.method, req.path, status);
    } else {
      fmt::print(stderr,
                 "{} {} -> {}: queued {:.0f} ms, prompt {} tokens ({} cached, {:.1f} tok/s), {} "
                 "generated{} ({:.1f} tok/s), {}\n",
                 req.method, req.path, status, 1e3 * r->queued_s, r->prompt_tokens,
                 r->cached_tokens,
                 r->prompt_s > 0 ? (r->prompt_tokens - r->cached_tokens) / r->prompt_s : 0.0,
                 r->completion_tokens, n > 1 ? fmt::format(" (choice 0 of {})", n) : "",
                 r->decode_s > 0 ? r->completion_tokens / r->decode_s : 0.0,
                 r->cancelled        ? "cancelled (client gone or server stopping)"
                 : !r->error.empty() ? "failed: " + r->error
                                     : r->finish_reason);
    }
    std::fflush(stderr);
  }

  // The request queued for a slot, or 503 when the queue is full.
  std::shared_ptr<JobHandle> submit(const CompletionRequest& req, std::vector<int32_t> ids) {
    auto job = scheduler().submit({std::move(ids), req.generation, req.n});
    if (!job)
      throw ApiError(503,
                     fmt::format("the server is busy: {} requests are waiting for one of its {} "
                                 "slots; retry later",
                                 options.scheduler.max_queue, scheduler().n_slots()),
                     "", "overloaded");
    return job;
  }

  // Waits for the job's end, cancelling it when the client goes away.
  // Whether the request being served should stop: its client is gone, or the server stops
  // (so that stop() ends in-flight generations instead of waiting them out).
  bool abandoned() const { return stopping || GuardedServer::client_gone(); }

  // Waits for the job's end, cancelling it when it is abandoned.
  void wait_for(JobHandle& job, std::vector<JobHandle::Piece>& pieces) const {
    while (!job.wait(pieces, std::chrono::milliseconds(50)))
      if (!job.cancelled() && abandoned()) job.cancel();
  }


  void complete(const httplib::Request& http_req, const std::string& body, httplib::Response& res,
                bool chat, std::shared_ptr<InFlight> in_flight_guard,
                RequestMemory::Reservation& memory) {
    auto req =
        std::make_shared<CompletionRequest>(parse_completion_request(body, chat, options.defaults));
    std::vector<int32_t> ids = engine->prompts.prompt_tokens(*req, intake.lend_to_render(memory));
    // The grammar (a request's, or its tools') lives as long as the generation: counted in the
    // request memory until then (a stream's outlives this handler, so the reservation is shared).
    auto grammar_memory = std::make_shared<RequestMemory::Reservation>(request_memory);
    if (req->generation.grammar)
      intake.reserve(req->generation.grammar->memory_bytes(), "its grammar", *grammar_memory);
    const CompletionIds cid{fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                            std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count(),
                            options.model_name};
    if (abandoned()) return reply_cancelled(res);
    auto job = submit(*req, std::move(ids));
    if (!req->stream) {
      std::vector<JobHandle::Piece> pieces;
      wait_for(*job, pieces);
      const auto& results = job->results();
      if (job->cancelled()) {
        log(http_req, 503, &results[0], req->n);
        return reply_cancelled(res);
      }
      log(http_req, 200, &results[0], req->n);
      if (const GenerationResult* failed = job->first_failure()) {
        if (failed->request_fault) throw ApiError(400, failed->error, req->grammar_param);
        throw std::runtime_error(failed->error);
      }
      res.set_content(dump_json(completion_response(*req, cid, results, token_text())),
                      "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    const std::string method = http_req.method, path = http_req.path;
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, req, job, cid, method, path, in_flight_guard, grammar_memory](size_t,
                                                                             httplib::DataSink& sink) {
          const bool sent = stream_completion(*req, *job, cid, sink, stream_context());
          if (!sent) {
            job->cancel();
            std::vector<JobHandle::Piece> rest;
            wait_for(*job, rest);  // the results are complete once it is done
          }
          httplib::Request logged;
          logged.method = method, logged.path = path;
          log(logged, 200, &job->results()[0], req->n);
          return sent;
        });
  }

  // The most values one embeddings answer may hold (inputs x width): about 50 MB of JSON.
  static constexpr int64_t kMaxEmbeddingValues = int64_t{1} << 22;

  // /v1/embeddings: each input a job of the scheduler (beside generating requests), at most
  // one per slot of this request in flight at once, so a long list waits its turn instead of
  // filling the queue (and when the queue is full, for its own jobs first: 503 only when it has
  // none in flight); the vectors in input order.
  void embed(const httplib::Request& http_req, const std::string& body, httplib::Response& res) {
    const int64_t n_embd = model().config.n_embd;
    const EmbeddingRequest req = parse_embedding_request(parse_body(body), n_embd, model().config.n_vocab);
    if (static_cast<int64_t>(req.inputs.size()) * n_embd > kMaxEmbeddingValues)
      throw ApiError(400,
                     fmt::format("{} inputs of {} values each are over the {} values one answer "
                                 "holds; send at most {} inputs per request",
                                 req.inputs.size(), n_embd, kMaxEmbeddingValues,
                                 kMaxEmbeddingValues / n_embd),
                     "input");
    std::vector<std::vector<int32_t>> prompts;
    int64_t tokens = 0;
    for (size_t i = 0; i < req.inputs.size(); ++i) {
      const auto& in = req.inputs[i];
      std::vector<int32_t> ids = in.ids.empty() ? engine->prompts.input_tokens(in.text, i) : in.ids;
      engine->prompts.check_context(ids.size(), fmt::format("input {}", i), "input");
      tokens += static_cast<int64_t>(ids.size());
      prompts.push_back(std::move(ids));
    }
    if (abandoned()) return reply_cancelled(res);
    std::vector<std::shared_ptr<JobHandle>> jobs;
    std::vector<std::vector<float>> vectors;
    auto cancel_all = [&] {
      for (auto& j : jobs) j->cancel();
    };
    const size_t window = static_cast<size_t>(scheduler().n_slots());
    for (size_t next = 0, done = 0; done < prompts.size();) {
      while (next < prompts.size() && next - done < window) {
        JobRequest job;
        job.prompt = std::move(prompts[next++]);
        job.params.max_tokens = 0;
        job.embed = engine->pooling;
        auto handle = scheduler().submit(job);
        if (!handle && next - 1 > done) {  // the queue is full: wait for one of ours first
          prompts[--next] = std::move(job.prompt);
          break;
        }
        if (!handle) {
          cancel_all();
          throw ApiError(503, "the server is busy: its queue is full; retry later", "", "overloaded");
        }
        jobs.push_back(std::move(handle));
      }
      std::vector<JobHandle::Piece> pieces;
      JobHandle& job = *jobs[done++];
      wait_for(job, pieces);
      if (job.cancelled()) {
        cancel_all();
        log(http_req, 503, nullptr);
        return reply_cancelled(res);
      }
      if (const GenerationResult* failed = job.first_failure()) {
        cancel_all();
        throw std::runtime_error(failed->error);
      }
      vectors.push_back(job.embedding());
    }
    res.set_content(dump_json(embedding_response(vectors, req.base64, options.model_name, tokens)),
                    "application/json");
    log(http_req, 200, nullptr);
  }

  // A token's text in logprobs: the bytes it stands for (a control token's name).
  TokenText token_text() const {
    const Tokenizer* tok = model().tokenizer.get();
    return [tok](int32_t id) { return tok->has_text(id) ? tok->token_bytes(id) : tok->token_text(id); };
  }

  // Before the body is read: refuse what cannot be read safely, and a missing API key.
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
    const HeadRefusal refusal = refuse_head(req, {ready, draining}, options.api_key);
    if (refusal.status == 0) return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, refusal.status, refusal.message);
    log(req, refusal.status, nullptr);
    GuardedServer::close_after_response(res);  // the body, if any, is left unread
    return httplib::Server::HandlerResponse::Handled;
  }

  StreamContext stream_context() const {
    return {token_text(), [this] { return abandoned(); }, [this] { return stopping.load(); },
            [] { return GuardedServer::client_half_closed(); }};
  }

  // The reply to a request whose handler failed: the API's error (with Retry-After on 503),
  // strata's one-line errors as 400, and a JSON field no check foresaw as 400. The one place
  // failures of the POST routes are mapped.
  template <typename Handle>
  void answer(const httplib::Request& req, httplib::Response& res, Handle&& handle) {
    try {
      handle();
    } catch (const ApiError& e) {
      reply_error(res, e.status, e.what(), e.param, e.code);
      if (e.status == 503) res.set_header("Retry-After", "1");
      log(req, e.status, nullptr);
    } catch (const Error& e) {
      reply_error(res, 400, e.what());
      log(req, 400, nullptr);
    } catch (const nlohmann::json::exception& e) {
      reply_error(res, 400, fmt::format("the request does not fit the API: {}", e.what()));
      log(req, 400, nullptr);
    }
  }

  void routes() {
    hygiene();
    status_routes();
    api_routes();
  }

  // Limits, the head's checks before any route, and the replies of what no route answers.
  void hygiene() {
    http.set_payload_max_length(options.max_body_bytes);
    http.set_refusal_body([this](int status, const std::string& message) {
      if (options.log_requests) {
        fmt::print(stderr, "(request head refused) -> {}: {}\n", status, message);
        std::fflush(stderr);
      }
      return dump_json(error_body(status, message));
    });
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return pre_route(req, res);
    });
    unrouted();
  }

  // The GET routes: health, the chat page, metrics, slots, props, the model list.
  void status_routes() {
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (!ready) {
        res.status = 503;
        res.set_content(R"({"status":"loading"})", "application/json");
        return;
      }
      if (draining) {
        res.status = 503;
        res.set_content(R"({"status":"draining"})", "application/json");
        return;
      }
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    auto page = [this](const httplib::Request& req, httplib::Response& res) {
      res.set_content(chat_page_html().data(), chat_page_html().size(), "text/html; charset=utf-8");
      res.set_header("Content-Security-Policy", std::string(kChatPagePolicy));
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Cache-Control", "no-cache");
      log(req, 200, nullptr);
    };
    http.Get("/", page);
    http.Get("/index.html", page);
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(prometheus_metrics(scheduler().metrics(), http.stats()),
                      "text/plain; version=0.0.4");
    });
    http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_json(slots_json(scheduler().slots(), scheduler().slot_context())),
                      "application/json");
    });
    http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
      ServerProps p;
      p.model_path = model().file->path();
      p.model_name = options.model_name;
      p.chat_template = chat_template().source();
      p.total_slots = scheduler().n_slots();
      p.slot_context = scheduler().slot_context();
      p.max_tokens = options.defaults.max_tokens;
      p.sampling = options.defaults.sampling;
      p.seed = options.defaults.seed;
      res.set_content(dump_json(props_json(p)), "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json models = {{"object", "list"},
                           {"data", json::array({{{"id", options.model_name},
                                                  {"object", "model"},
                                                  {"created", 0},
                                                  {"owned_by", "strata"}}})}};
      res.set_content(dump_json(models), "application/json");
    });
  }

  // The POST routes of the API and llama-server's token endpoints.
  void api_routes() {
    enum class Endpoint { Completions, Chat, Embeddings };
    auto handler = [this](Endpoint kind) {
      return [this, kind](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) {
        RequestMemory::Reservation memory(request_memory);
        auto guard = std::make_shared<InFlight>(in_flight);  // a stream holds it to its end
        answer(req, res, [&] {
          const std::string body = intake.read_body(req, reader, res, memory);
          intake.reserve_document(body, memory);
          if (kind == Endpoint::Embeddings)
            embed(req, body, res);
          else
            complete(req, body, res, kind == Endpoint::Chat, guard, memory);
        });
        // The body and its document are freed; glibc keeps freed memory in its arenas, so a
        // large request's pages go back to the system now (the budget counts what is held).
        if (memory.held() >= kTrimAfterBytes) ::malloc_trim(0);
      };
    };
    // llama-server's token endpoints: the body in, a JSON answer out (server/token_api.h).
    auto json_endpoint = [this](auto reply) {
      return [this, reply](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
        RequestMemory::Reservation memory(request_memory);
        const InFlight guard(in_flight);
        this->answer(req, res, [&] {
          const std::string body = intake.read_body(req, reader, res, memory);
          intake.reserve_document(body, memory);
          if (model().tokenizer == nullptr) throw ApiError(501, "the model has no tokenizer");
          const auto reserve = [&](uint64_t bytes) { intake.reserve(bytes, "the answer", memory); };
          res.set_content(reply(*model().tokenizer, parse_body(body), reserve), "application/json");
          log(req, 200, nullptr);
        });
        if (memory.held() >= kTrimAfterBytes) ::malloc_trim(0);  // as the API routes do
      };
    };
    http.Post("/tokenize", json_endpoint(tokenize_response));
    http.Post("/detokenize", json_endpoint(detokenize_response));
    http.Post("/v1/completions", handler(Endpoint::Completions));
    http.Post("/v1/chat/completions", handler(Endpoint::Chat));
    http.Post("/v1/embeddings", handler(Endpoint::Embeddings));
    http.Post("/completions", handler(Endpoint::Completions));  // paths some clients use without /v1
    http.Post("/chat/completions", handler(Endpoint::Chat));
    http.Post("/embeddings", handler(Endpoint::Embeddings));
  }

  // What no route answered (404, httplib's own refusals) and what a handler threw past answer().
  void unrouted() {
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler already wrote the error
      const std::string message =
          res.status == 404 ? fmt::format("no route {} {}", req.method, req.path.substr(0, 256))
          : res.status == 413
              ? fmt::format("the request body is over {} bytes", options.max_body_bytes)
          : res.status == 414 ? std::string("the request line is too long")
          : res.status == 400 ? std::string("malformed HTTP request (request line or headers)")
                              : fmt::format("HTTP {}", res.status);
      if (res.status == 400 || res.status == 413 || res.status == 414) {
        // httplib stopped reading mid-request: what follows is not at a request boundary.
        GuardedServer::close_after_response(res);
      }
      reply_error(res, res.status, message);
      log(req, res.status, nullptr);
    });
    http.set_exception_handler(
        [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          reply_error(res, 500, "internal error: " + what);
          log(req, 500, nullptr);
        });
  }
};

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

void HttpServer::attach(const Model& model, Session& session, const std::string& model_name) {
  Impl& s = *impl_;
  if (s.engine) fail("the server already serves a model");
  if (!model_name.empty()) s.options.model_name = model_name;  // no handler reads it yet
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
