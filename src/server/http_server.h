// strata's OpenAI-compatible HTTP server (cpp-httplib): POST /v1/completions and
// /v1/chat/completions (whole or streamed as server-sent events), /v1/embeddings (pooled final
// hidden states, computed in the same batches as generation), GET /v1/models, /health,
// /metrics (Prometheus) and /slots; Ollama's /api/* and llama-server's /completion and /infill
// run the same way, their replies in their own shapes (server/reply_dialect.h). Requests generate at once on the session's sequence slots
// through the batch scheduler (continuous batching, generation/batch_scheduler.h); each slot keeps
// the KV entries of its last conversation, and a request goes to the slot sharing the longest
// prefix with it, so a follow-up evaluates only the new part. Requests beyond the slots wait in
// a bounded queue; past it they get 503 with Retry-After.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "model/model.h"
#include "generation/batch_scheduler.h"
#include "generation/pooling.h"
#include "runtime/session.h"
#include "server/guarded_http.h"
#include "server/openai_api.h"
#include "server/request_memory.h"

namespace strata {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (tests)
  std::string api_key;  // non-empty: /v1/* needs "Authorization: Bearer <key>"
  std::string model_name;
  std::string chat_template;  // --chat-template NAME|FILE; empty: the model's own
  // /v1/embeddings' pooling (--pooling); none: the model's own (<arch>.pooling_type), else mean.
  std::optional<Pooling> pooling;
  ServerDefaults defaults;
  size_t max_body_bytes = size_t{8} << 20;  // however it is sent (length, chunked)
  // Bodies and their parsed JSON held at once, all requests together (server/request_memory.h);
  // at least twice max_body_bytes. Part of what serve_front_end_bytes() counts.
  uint64_t request_memory_bytes = uint64_t{64} << 20;
  ConnectionLimits connections;  // deadlines, backlog, workers
  SchedulerOptions scheduler;    // queue limit, step size
  bool log_requests = true;      // one line per request on stderr
  // After drain(): how long requests in flight may take to finish before they are cancelled.
  std::chrono::milliseconds drain_timeout{30000};
};

// RAM the HTTP side may hold at once with these options, the most it can take under any load:
// the request memory, and per worker thread its request head, its read buffer and its stack's
// touched pages. `strata serve` plans it inside --ram-budget.
uint64_t server_ram_bytes(const ServerOptions& options);

class HttpServer {
 public:
  HttpServer(const Model& model, Session& session, ServerOptions options);
  // A server that can bind and listen before its model is loaded: until attach(), /health
  // answers 503 {"status":"loading"} (a load balancer or Kubernetes readiness probe waits) and
  // every route but / answers 503.
  explicit HttpServer(ServerOptions options);
  // Serves `model` on `session` from now on (both must outlive the server); a non-empty
  // model_name replaces options.model_name; a drafter (which must outlive the server too) makes
  // the slots decode speculatively. Fails on a chat template strata cannot run.
  void attach(const Model& model, Session& session, const std::string& model_name = "",
              Drafter* drafter = nullptr, const SpeculationParams& speculation = {});
  bool ready() const;  // attach() has been done
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address; returns the port (the chosen one for port 0). Fails (strata::Error) with
  // the reason when the address cannot be bound.
  int bind();
  void listen();  // serves until stop(); call after bind()
  // Ends listen(): requests still generating are cancelled at their next step (their clients'
  // connections close), so this returns promptly; a stop() before listen() makes listen()
  // return as soon as it begins. Safe from a signal handler.
  void stop();
  // Graceful shutdown (SIGTERM): from now on new requests get 503 and /health answers 503
  // {"status":"draining"} (a load balancer takes the replica out); listen() returns once the
  // requests in flight (queued, generating, streaming) have finished, or at drain_timeout,
  // when the rest are cancelled as by stop(). Safe from a signal handler.
  void drain();
  int in_flight() const;  // API requests being served
  // The chat template in use: "gguf" (the model's), a built-in name or a file.
  const std::string& chat_template_name() const;
  Pooling pooling() const;  // what /v1/embeddings pools by
  // Serves one connected socket on the calling thread until it closes (fuzzing, tests).
  void serve_connection(int sock);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
