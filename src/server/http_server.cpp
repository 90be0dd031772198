#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/error.h"
#include "runtime/generator.h"

namespace strata {

using nlohmann::json;

struct HttpServer::Impl {
  const Model& model;
  Session& session;
  ServerOptions options;
  Generator generator;
  std::mutex generation;  // one request generates at a time
  std::atomic<uint64_t> next_id{1};
  httplib::Server http;

  Impl(const Model& m, Session& s, ServerOptions o)
      : model(m), session(s), options(std::move(o)), generator(m, s) {}

  void reply_error(httplib::Response& res, int status, const std::string& message,
                   const std::string& param = "", const std::string& code = "") {
    res.status = status;
    res.set_content(dump_json(error_body(status, message, param, code)), "application/json");
  }

  // Prompt tokens of a request, or ApiError.
  std::vector<int32_t> prompt_tokens(CompletionRequest& req) {
    const Tokenizer& tok = *model.tokenizer;
    std::vector<int32_t> ids;
    if (req.chat) {
      const std::string tmpl = model.file->get_string("tokenizer.chat_template", "");
      auto text_of = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
      ChatPrompt p = render_chat(req.messages, tmpl, text_of(tok.bos()), text_of(tok.eos()));
      for (auto& s : p.stop) req.generation.stop.push_back(std::move(s));
      ids = tok.encode(p.text, tok.add_bos_default(), /*parse_special=*/true);
    } else if (!req.prompt_ids.empty()) {
      ids = req.prompt_ids;
      for (int32_t t : ids)
        if (t >= model.config.n_vocab)
          throw ApiError(400,
                         fmt::format("prompt token id {} is outside the vocabulary (0..{})", t,
                                     model.config.n_vocab - 1),
                         "prompt");
    } else {
      ids = tok.encode(req.prompt, tok.add_bos_default());
    }
    if (ids.empty()) throw ApiError(400, "the prompt is empty", req.chat ? "messages" : "prompt");
    if (static_cast<int64_t>(ids.size()) >= session.n_ctx())
      throw ApiError(400,
                     fmt::format("the prompt has {} tokens but the context holds {} (start the "
                                 "server with a larger -c)",
                                 ids.size(), session.n_ctx()),
                     req.chat ? "messages" : "prompt", "context_length_exceeded");
    return ids;
  }

  void log(const httplib::Request& req, int status, const GenerationResult* r) {
    if (!options.log_requests) return;
    if (r == nullptr) {
      fmt::print(stderr, "{} {} -> {}\n", req.method, req.path, status);
    } else {
      fmt::print(stderr,
                 "{} {} -> {}: prompt {} tokens ({} cached, {:.1f} tok/s), {} generated "
                 "({:.1f} tok/s), {}\n",
                 req.method, req.path, status, r->prompt_tokens, r->cached_tokens,
                 r->prompt_s > 0 ? (r->prompt_tokens - r->cached_tokens) / r->prompt_s : 0.0,
                 r->completion_tokens, r->decode_s > 0 ? r->completion_tokens / r->decode_s : 0.0,
                 r->cancelled ? "cancelled by the client" : r->finish_reason);
    }
    std::fflush(stderr);
  }

  void complete(const httplib::Request& http_req, httplib::Response& res, bool chat) {
    auto req = std::make_shared<CompletionRequest>(
        parse_completion_request(http_req.body, chat, options.defaults));
    const auto ids = std::make_shared<std::vector<int32_t>>(prompt_tokens(*req));
    const CompletionIds cid{fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                            std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count(),
                            options.model_name};
    if (!req->stream) {
      GenerationResult r;
      {
        std::lock_guard<std::mutex> lock(generation);
        r = generator.generate(*ids, req->generation);
      }
      res.set_content(dump_json(completion_response(*req, cid, r)), "application/json");
      log(http_req, 200, &r);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    const std::string method = http_req.method, path = http_req.path;
    res.set_chunked_content_provider(
        "text/event-stream", [this, req, ids, cid, method, path](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string event = "data: " + dump_json(j) + "\n\n";
            return sink.write(event.data(), event.size());
          };
          GenerationResult r;
          {
            std::lock_guard<std::mutex> lock(generation);
            if (req->chat) {
              json first = completion_chunk(*req, cid, "", "");
              first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
              if (!send(first)) return false;
            }
            r = generator.generate(*ids, req->generation, [&](std::string_view text) {
              return send(completion_chunk(*req, cid, std::string(text), ""));
            });
          }
          httplib::Request logged;
          logged.method = method, logged.path = path;
          log(logged, 200, &r);
          if (r.cancelled) return false;
          json last = completion_chunk(*req, cid, "", r.finish_reason);
          if (req->include_usage) last["usage"] = usage_json(r);
          if (!send(last)) return false;
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        });
  }

  void routes() {
    http.set_payload_max_length(options.max_body_bytes);
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
        return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + options.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      reply_error(res, 401, "missing or wrong API key (send \"Authorization: Bearer <key>\")");
      log(req, 401, nullptr);
      return httplib::Server::HandlerResponse::Handled;
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json models = {{"object", "list"},
                           {"data", json::array({{{"id", options.model_name},
                                                  {"object", "model"},
                                                  {"created", 0},
                                                  {"owned_by", "strata"}}})}};
      res.set_content(dump_json(models), "application/json");
    });
    auto handler = [this](bool chat) {
      return [this, chat](const httplib::Request& req, httplib::Response& res) {
        try {
          complete(req, res, chat);
        } catch (const ApiError& e) {
          reply_error(res, e.status, e.what(), e.param, e.code);
          log(req, e.status, nullptr);
        } catch (const Error& e) {
          reply_error(res, 400, e.what());
          log(req, 400, nullptr);
        }
      };
    };
    http.Post("/v1/completions", handler(false));
    http.Post("/v1/chat/completions", handler(true));
    http.Post("/completions", handler(false));  // paths some clients use without /v1
    http.Post("/chat/completions", handler(true));
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler already wrote the error
      const std::string message =
          res.status == 404 ? fmt::format("no route {} {}", req.method, req.path)
          : res.status == 413
              ? fmt::format("the request body is over {} bytes", options.max_body_bytes)
              : fmt::format("HTTP {}", res.status);
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

HttpServer::HttpServer(const Model& model, Session& session, ServerOptions options)
    : impl_(std::make_unique<Impl>(model, session, std::move(options))) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  auto& o = impl_->options;
  if (o.port == 0) {
    const int port = impl_->http.bind_to_any_port(o.host);
    if (port <= 0) fail("cannot listen on {} (any port)", o.host);
    o.port = port;
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port);
  return o.port;
}

void HttpServer::listen() {
  impl_->http.listen_after_bind();
}

void HttpServer::stop() {
  impl_->http.stop();
}

}  // namespace strata
