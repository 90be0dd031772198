// The HTTP server's state and handlers (server/http_server.h's Impl), shared by the files that
// define its routes: http_server.cpp (status and OpenAI routes), completion_routes.cpp (running a
// completion or embeddings request on the scheduler, whatever its API), ollama_routes.cpp
// (Ollama's API and llama-server's /completion).
#pragma once

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
#include "server/http_server.h"
#include "server/completion_stream.h"
#include "server/reply_dialect.h"
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
                   const std::string& param = "", const std::string& code = "",
                   const ReplyDialect& dialect = *openai_dialect()) {
    res.status = status;
    res.set_content(dump_json(dialect.error(status, message, param, code)), "application/json");
  }

  // The answer to a request cancelled before its end: the server is stopping, or the client
  // reset its connection (then nobody reads it). Never a 200 without a body.
  void reply_cancelled(httplib::Response& res, const ReplyDialect& dialect = *openai_dialect()) {
    reply_error(res, 503,
                stopping ? "the server is stopping; retry on another replica or later"
                         : "the request was cancelled: the client reset its connection",
                "", "cancelled", dialect);
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


  void complete(const httplib::Request& http_req, std::shared_ptr<CompletionRequest> req,
                std::shared_ptr<const ReplyDialect> dialect, httplib::Response& res,
                std::shared_ptr<InFlight> in_flight_guard, RequestMemory::Reservation& memory);

  // The most values one embeddings answer may hold (inputs x width): about 50 MB of JSON.
  static constexpr int64_t kMaxEmbeddingValues = int64_t{1} << 22;

  // /v1/embeddings: each input a job of the scheduler (beside generating requests), at most
  // one per slot of this request in flight at once, so a long list waits its turn instead of
  // filling the queue (and when the queue is full, for its own jobs first: 503 only when it has
  // none in flight); the vectors in input order.
  void embed(const httplib::Request& http_req, const std::string& body, httplib::Response& res);

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
  // Errors are written in `dialect`'s shape (the API the route speaks).
  template <typename Handle>
  void answer(const httplib::Request& req, httplib::Response& res, Handle&& handle,
              const ReplyDialect& dialect = *openai_dialect()) {
    try {
      handle();
    } catch (const ApiError& e) {
      reply_error(res, e.status, e.what(), e.param, e.code, dialect);
      if (e.status == 503) res.set_header("Retry-After", "1");
      log(req, e.status, nullptr);
    } catch (const Error& e) {
      reply_error(res, 400, e.what(), "", "", dialect);
      log(req, 400, nullptr);
    } catch (const nlohmann::json::exception& e) {
      reply_error(res, 400, fmt::format("the request does not fit the API: {}", e.what()), "", "", dialect);
      log(req, 400, nullptr);
    }
  }

  void routes() {
    hygiene();
    status_routes();
    api_routes();
    ollama_routes();
  }

  // Ollama's /api/* and llama-server's /completion and /infill (ollama_routes.cpp).
  void ollama_routes();
  void ollama_generation_routes();  // /api/chat, /api/generate
  void ollama_embedding_routes();   // /api/embed, /api/embeddings
  void ollama_model_routes();       // /api/tags, /api/ps, /api/show, /api/version
  void llama_server_routes();       // /completion, /infill

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
  // A POST route that generates or embeds, whatever its API: the request memory and the
  // in-flight count held while handle(req, res, body, guard, memory) runs on the body read within
  // its limits (a stream keeps the guard to its end), errors in `dialect`'s shape.
  template <typename Handle>
  auto body_route(std::shared_ptr<const ReplyDialect> dialect, Handle handle) {
    return [this, dialect, handle](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
      RequestMemory::Reservation memory(request_memory);
      auto guard = std::make_shared<InFlight>(in_flight);
      answer(
          req, res,
          [&] {
            const std::string body = intake.read_body(req, reader, res, memory);
            intake.reserve_document(body, memory);
            handle(req, res, body, guard, memory);
          },
          *dialect);
      // The body and its document are freed; glibc keeps freed memory in its arenas, so a
      // large request's pages go back to the system now (the budget counts what is held).
      if (memory.held() >= kTrimAfterBytes) ::malloc_trim(0);
    };
  }

  void api_routes() {
    enum class Endpoint { Completions, Chat, Embeddings };
    auto handler = [this](Endpoint kind) {
      return body_route(openai_dialect(), [this, kind](const httplib::Request& req, httplib::Response& res,
                                                       const std::string& body, const std::shared_ptr<InFlight>& guard,
                                                       RequestMemory::Reservation& memory) {
        if (kind == Endpoint::Embeddings) return embed(req, body, res);
        const bool chat = kind == Endpoint::Chat;
        complete(req, std::make_shared<CompletionRequest>(parse_completion_request(body, chat, options.defaults)),
                 openai_dialect(), res, guard, memory);
      });
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


}  // namespace strata
