#include "server/http_server.h"

#include "chat/json_schema_grammar.h"
#include "generation/grammar.h"

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
#include "server/embeddings_api.h"
#include "server/http_rules.h"
#include "server/metrics.h"
#include "server/token_api.h"

namespace strata {

using nlohmann::json;

// What serving needs of the model: set once by attach(), when it is loaded.
struct ServingEngine {
  ServingEngine(const Model& m, Session& s, const ServerOptions& options)
      : model(m),
        session(s),
        chat_template(chat_template_for(m, options.chat_template)),
        pooling(options.pooling ? *options.pooling
                                : model_pooling(*m.file, m.config.architecture).value_or(Pooling::Mean)),
        scheduler(m, s, options.scheduler) {}
  ~ServingEngine() { scheduler.stop(); }

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
};

struct HttpServer::Impl {
  ServerOptions options;
  // Null until attach(); `ready` is set after it, and no route but /health and / runs before.
  std::unique_ptr<ServingEngine> engine;
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
  GuardedServer http;

  // A request that held this much returns its freed pages to the system when it ends.
  static constexpr uint64_t kTrimAfterBytes = uint64_t{1} << 20;

  explicit Impl(ServerOptions o)
      : options(std::move(o)),
        request_memory(options.request_memory_bytes),
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

  // Refuses, before tokenizing it, a text that cannot fit the context whatever its tokens.
  void check_fits_before_tokenizing(const std::string& text, const char* param,
                                    const std::string& what = "the prompt") const {
    const int64_t at_least = model().tokenizer->min_tokens(text.size());
    if (at_least >= session().n_ctx())
      throw ApiError(400,
                     fmt::format("{} has at least {} tokens ({} bytes) but the context "
                                 "holds {} (start the server with a larger -c)",
                                 what, at_least, text.size(), session().n_ctx()),
                     param, "context_length_exceeded");
  }

  // A request with tools: the style the template writes calls in, and for a required call (any
  // tool, or the named one) the grammar that makes the reply one call.
  void prepare_tools(CompletionRequest& req) const {
    // A template that never mentions tools would drop them (and meet a null content where it
    // expects text): refused rather than ignored.
    const bool tool_messages = std::any_of(req.messages.begin(), req.messages.end(), [](const ChatMessage& m) {
      return m.role == "tool" || m.content_null;
    });
    if ((req.tools_active() || tool_messages) &&
        chat_template().source().find("tool") == std::string::npos)
      throw ApiError(400,
                     fmt::format("the chat template '{}' has no place for tools or tool calls; "
                                 "start the server with one that has (--chat-template FILE)",
                                 chat_template().name()),
                     req.tools_active() ? "tools" : "messages");
    if (!req.tools_active()) return;
    req.tool_style = tool_call_style(chat_template().source());
    if (req.tool_choice != "required" && req.tool_choice != "function") return;
    try {
      req.generation.grammar = std::make_shared<const Grammar>(
          Grammar::parse(tool_call_grammar(req.tool_style, req.tools, req.tool_function)));
    } catch (const SchemaError& e) {
      throw ApiError(400, fmt::format("a tool's parameters: {} (keyword '{}')", e.what(), e.keyword()), "tools");
    }
  }

  // Prompt tokens of a request, or ApiError.
  std::vector<int32_t> prompt_tokens(CompletionRequest& req) {
    const Tokenizer& tok = *model().tokenizer;
    std::vector<int32_t> ids;
    if (req.chat) {
      ChatPrompt p;
      prepare_tools(req);
      try {
        jinja::Dict extra;
        if (req.tools_active()) extra.set("tools", jinja::from_json(req.tools));
        p = chat_template().apply(message_values(req.messages), extra);
      } catch (const ChatTemplateRefusal& e) {
        throw ApiError(400, e.what(), "messages");
      } catch (const std::runtime_error& e) {
        throw ApiError(400, e.what(), "messages");
      }
      for (auto& s : p.stop) req.generation.stop.push_back(std::move(s));
      check_fits_before_tokenizing(p.text, "messages");
      // A template that writes the BOS itself ({{ bos_token }}) gets no second one.
      const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : std::string();
      const bool has_bos = !bos.empty() && p.text.compare(0, bos.size(), bos) == 0;
      ids = tok.encode(p.text, tok.add_bos_default() && !has_bos, /*parse_special=*/true);
    } else if (!req.prompt_ids.empty()) {
      ids = req.prompt_ids;
      for (int32_t t : ids)
        if (t >= model().config.n_vocab)
          throw ApiError(400,
                         fmt::format("prompt token id {} is outside the vocabulary (0..{})", t,
                                     model().config.n_vocab - 1),
                         "prompt");
    } else {
      check_fits_before_tokenizing(req.prompt, "prompt");
      ids = tok.encode(req.prompt, tok.add_bos_default());
    }
    if (ids.empty()) throw ApiError(400, "the prompt is empty", req.chat ? "messages" : "prompt");
    for (const auto& [id, bias] : req.generation.sampling.logit_bias)
      if (id >= model().config.n_vocab)
        throw ApiError(400,
                       fmt::format("logit_bias token id {} is outside the vocabulary (0..{})", id,
                                   model().config.n_vocab - 1),
                       "logit_bias");
    if (static_cast<int64_t>(ids.size()) >= session().n_ctx())
      throw ApiError(400,
                     fmt::format("the prompt has {} tokens but the context holds {} (start the "
                                 "server with a larger -c)",
                                 ids.size(), session().n_ctx()),
                     req.chat ? "messages" : "prompt", "context_length_exceeded");
    return ids;
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

  [[noreturn]] void memory_busy() const {
    throw ApiError(503,
                   fmt::format("the server's request memory ({} MiB) is held by other requests; "
                               "retry later",
                               request_memory.budget() >> 20),
                   "", "overloaded");
  }

  // The body as it arrives (Content-Length or chunked), refused past max_body_bytes. Its
  // buffer is reserved in the request memory before it grows (503 when that is full).
  // What is left of a refused body is not read: the connection closes after the reply.
  std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                        httplib::Response& res, RequestMemory::Reservation& memory) {
    std::string body;
    bool over = false, busy = false;
    auto room_for = [&](size_t size) {  // the buffer holds `size` bytes, reserved first
      if (size <= body.capacity()) return true;
      const size_t capacity = std::min(std::max(size, 2 * body.capacity()), options.max_body_bytes);
      if (!memory.grow(capacity - body.capacity())) return false;
      body.reserve(capacity);
      return true;
    };
    // The declared length is reserved whole (httplib has refused one over the limit).
    const size_t declared = static_cast<size_t>(std::min<uint64_t>(
        req.get_header_value<uint64_t>("Content-Length"), options.max_body_bytes));
    if (!room_for(declared)) busy = true;
    const bool read = !busy && reader([&](const char* data, size_t n) {
      if (body.size() + n > options.max_body_bytes) {
        over = true;
        return false;
      }
      if (!room_for(body.size() + n)) {
        busy = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (over || busy || !read) {
      GuardedServer::close_after_response(res);
    }
    if (busy) memory_busy();
    // httplib itself refuses a Content-Length over the limit (status 413) before reading.
    if (over || (!read && res.status == 413))
      throw ApiError(413, fmt::format("the request body is over {} bytes", options.max_body_bytes));
    if (!read) throw ApiError(400, "the request body ended early or took too long to arrive");
    return body;
  }

  // Reserves what the body's JSON document will hold once parsed, before parsing it: 413 when
  // no request could have it, 503 when others hold the memory now.
  void reserve_document(const std::string& body, RequestMemory::Reservation& memory) const {
    const JsonShape shape = measure_json(body);
    check_json_depth(shape, "the request body");  // an Error: 400
    const uint64_t bytes = shape.document_bytes();
    if (bytes > request_memory.budget() - std::min(request_memory.budget(), memory.held()))
      throw ApiError(413, fmt::format("the request body has about {} JSON values, which would "
                                      "take {} MiB parsed; the server holds at most {} MiB for "
                                      "requests",
                                      shape.values, bytes >> 20, request_memory.budget() >> 20));
    if (!memory.grow(bytes)) memory_busy();
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

  static bool any_failed(const JobHandle& job) {
    return std::any_of(job.results().begin(), job.results().end(),
                       [](const GenerationResult& r) { return !r.error.empty(); });
  }

  void complete(const httplib::Request& http_req, const std::string& body, httplib::Response& res,
                bool chat, std::shared_ptr<InFlight> in_flight_guard) {
    auto req =
        std::make_shared<CompletionRequest>(parse_completion_request(body, chat, options.defaults));
    std::vector<int32_t> ids = prompt_tokens(*req);
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
      if (any_failed(*job)) throw std::runtime_error(results[0].error);
      res.set_content(dump_json(completion_response(*req, cid, results, token_text())),
                      "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    const std::string method = http_req.method, path = http_req.path;
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, req, job, cid, method, path, in_flight_guard](size_t, httplib::DataSink& sink) {
          const bool sent = stream(*req, *job, cid, sink);
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
    const Tokenizer& tok = *model().tokenizer;
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
      std::vector<int32_t> ids = in.ids;
      if (ids.empty()) {
        check_fits_before_tokenizing(in.text, "input", fmt::format("input {}", i));
        ids = tok.encode(in.text, tok.add_bos_default());
      }
      if (static_cast<int64_t>(ids.size()) >= session().n_ctx())
        throw ApiError(400,
                       fmt::format("input {} has {} tokens but the context holds {} (start the "
                                   "server with a larger -c)",
                                   i, ids.size(), session().n_ctx()),
                       "input", "context_length_exceeded");
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
      if (any_failed(job)) {
        cancel_all();
        throw std::runtime_error(job.results()[0].error);
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

  // Sends the job's text as server-sent events until it ends; false when the client is gone.
  bool stream(const CompletionRequest& req, JobHandle& job, const CompletionIds& cid,
              httplib::DataSink& sink) {
    auto send = [&](const json& j) {
      const std::string event = "data: " + dump_json(j) + "\n\n";
      return sink.write(event.data(), event.size());
    };
    if (req.chat)
      for (int i = 0; i < req.n; ++i) {
        json first = completion_chunk(req, cid, "", "", i);
        first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
        if (!send(first)) return false;
      }
    std::vector<JobHandle::Piece> pieces;
    std::vector<int64_t> sent_bytes(static_cast<size_t>(req.n), 0);  // per choice: text_offset
    std::vector<std::string> held(static_cast<size_t>(req.n));      // with tools: the whole text
    const TokenText text_of = token_text();
    bool done = false, probed = false;
    while (!done) {
      // Short waits: a client gone while its request waits for a slot is found within 10 ms.
      done = job.wait(pieces, std::chrono::milliseconds(10));
      for (const JobHandle::Piece& p : pieces) {
        if (req.tools_active()) {  // sent whole at the end: it may be a call, not text
          held[static_cast<size_t>(p.choice)] += p.text;
          continue;
        }
        int64_t& offset = sent_bytes[static_cast<size_t>(p.choice)];
        const json logprobs = req.generation.logprobs >= 0
                                  ? logprobs_json(req.chat, p.logprobs, text_of, offset)
                                  : json();
        offset += static_cast<int64_t>(p.text.size());
        if (!send(completion_chunk(req, cid, p.text, "", p.choice, logprobs))) return false;
      }
      pieces.clear();
      // The client sent its FIN: half-closed (it still reads) or gone. An SSE comment, which
      // clients ignore, draws a gone client's reset at once, so that a request waiting for a
      // slot is dropped then, not after its first token (dead streams filled the queue).
      if (!done && !probed && GuardedServer::client_half_closed()) {
        probed = true;
        const std::string ping = ": ping\n\n";
        if (!sink.write(ping.data(), ping.size())) return false;
      }
      if (!done && abandoned()) {
        // The headers (200) are sent: the stream ends with an error event saying why.
        if (stopping) send(error_body(503, "the server is stopping; the generation was cut"));
        return false;
      }
    }
    if (any_failed(job)) {
      send(error_body(500, "internal error: " + job.results()[0].error));
      return false;
    }
    const auto& results = job.results();
    std::vector<std::string> finish(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      finish[i] = results[i].finish_reason;
      if (!req.tools_active()) continue;
      // OpenAI's shape: the calls in one delta, each with its index, then the finish chunk.
      ToolReply t = tool_reply(req, cid, held[i], static_cast<int>(i));
      json chunk = completion_chunk(req, cid, "", "", static_cast<int>(i));
      json& delta = chunk["choices"][0]["delta"];
      delta = json::object();
      if (!t.message["content"].is_null()) delta["content"] = t.message["content"];
      if (t.called) {
        json calls = t.message["tool_calls"];
        for (size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
        delta["tool_calls"] = std::move(calls);
        finish[i] = "tool_calls";
      }
      if (!send(chunk)) return false;
    }
    for (size_t i = 0; i < results.size(); ++i) {
      json last = completion_chunk(req, cid, "", finish[i], static_cast<int>(i));
      if (req.include_usage && i + 1 == results.size()) last["usage"] = usage_json(results);
      if (!send(last)) return false;
    }
    const std::string end = "data: [DONE]\n\n";
    sink.write(end.data(), end.size());
    sink.done();
    return true;
  }

  // Before the body is read: refuse what cannot be read safely, and a missing API key.
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
    const auto refuse = [&](int status, const std::string& message) {
      reply_error(res, status, message);
      log(req, status, nullptr);
      GuardedServer::close_after_response(res);  // the body, if any, is left unread
      return httplib::Server::HandlerResponse::Handled;
    };
    // A compressed body would be inflated by httplib before any limit applies (510 KB of
    // gzip made 512 MiB); clients of this API send JSON as it is.
    const std::string encoding = req.get_header_value("Content-Encoding");
    if (!encoding.empty() && encoding != "identity")
      return refuse(415, fmt::format("Content-Encoding '{}' is not accepted; send the body "
                                     "uncompressed",
                                     encoding.substr(0, 64)));
    if (const std::string problem = framing_problem(req); !problem.empty())
      return refuse(400, problem);
    if (lacks_length(req))
      return refuse(411,
                    "the request has a body but neither Content-Length nor "
                    "Transfer-Encoding: chunked");
    const std::string transfer = req.get_header_value("Transfer-Encoding");
    if (!transfer.empty() && !equals_ignoring_case(transfer, "chunked"))
      return refuse(501, fmt::format("Transfer-Encoding '{}' is not supported (chunked is)",
                                     transfer.substr(0, 64)));
    // Loading: only /health (503 "loading") and the page answer; the rest need the model.
    if (!ready && req.path != "/health" && req.path != "/" && req.path != "/index.html")
      return refuse(503, "the model is still loading; retry shortly");
    // Draining (SIGTERM): what is running finishes, nothing new starts; /health says so.
    if (draining && req.path != "/health" && req.path != "/metrics")
      return refuse(503, "the server is shutting down; retry on another replica");
    // Every route but /health and the page (static, no secrets: it asks for the key) needs the
    // key when there is one.
    if (options.api_key.empty() || req.path == "/health" || req.path == "/" ||
        req.path == "/index.html")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value_count("Authorization") == 1 &&
        bearer_matches(req.get_header_value("Authorization"), options.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    return refuse(401, "missing or wrong API key (send \"Authorization: Bearer <key>\")");
  }

  void routes() {
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
    enum class Endpoint { Completions, Chat, Embeddings };
    auto handler = [this](Endpoint kind) {
      return [this, kind](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) {
        RequestMemory::Reservation memory(request_memory);
        auto guard = std::make_shared<InFlight>(in_flight);  // a stream holds it to its end
        try {
          const std::string body = read_body(req, reader, res, memory);
          reserve_document(body, memory);
          if (kind == Endpoint::Embeddings)
            embed(req, body, res);
          else
            complete(req, body, res, kind == Endpoint::Chat, guard);
        } catch (const ApiError& e) {
          reply_error(res, e.status, e.what(), e.param, e.code);
          if (e.status == 503) res.set_header("Retry-After", "1");
          log(req, e.status, nullptr);
        } catch (const Error& e) {
          reply_error(res, 400, e.what());
          log(req, 400, nullptr);
        } catch (const nlohmann::json::exception& e) {  // a field no check above foresaw
          reply_error(res, 400, fmt::format("the request does not fit the API: {}", e.what()));
          log(req, 400, nullptr);
        }
        // The body and its document are freed; glibc keeps freed memory in its arenas, so a
        // large request's pages go back to the system now (the budget counts what is held).
        if (memory.held() >= kTrimAfterBytes) ::malloc_trim(0);
      };
    };
    // llama-server's token endpoints: the body in, a JSON answer out (server/token_api.h).
    auto json_endpoint = [this](auto answer) {
      return [this, answer](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
        RequestMemory::Reservation memory(request_memory);
        const InFlight guard(in_flight);
        try {
          const std::string body = read_body(req, reader, res, memory);
          reserve_document(body, memory);
          if (model().tokenizer == nullptr) throw ApiError(501, "the model has no tokenizer");
          res.set_content(dump_json(answer(*model().tokenizer, parse_body(body))),
                          "application/json");
          log(req, 200, nullptr);
        } catch (const ApiError& e) {
          reply_error(res, e.status, e.what(), e.param, e.code);
          log(req, e.status, nullptr);
        } catch (const Error& e) {
          reply_error(res, 400, e.what());
          log(req, 400, nullptr);
        }
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
  s.engine = std::make_unique<ServingEngine>(model, session, s.options);
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
