// A request's way in, before any route runs: the head's hygiene (encodings, framing a proxy
// could read differently, a body without a length, the loading and draining states, the API
// key), and the body read within the per-request limit and the shared request memory, with
// its JSON document reserved before it is parsed. Every refusal is an ApiError or a status
// with a one-line message; the route's handler maps them to replies (server/http_server.cpp).
#pragma once

#include <httplib.h>

#include <string>

#include "chat/jinja_budget.h"
#include "server/request_memory.h"

namespace strata {

struct ServerOptions;

// What the server is doing, as the head's check needs it.
struct ServerState {
  bool ready = false;     // a model is attached
  bool draining = false;  // SIGTERM: what runs finishes, nothing new starts
};

// Why a request is refused before its body is read: status and message; status 0 lets it on.
struct HeadRefusal {
  int status = 0;
  std::string message;
};

// The checks on a request's head, in order; the API key is compared in constant time.
HeadRefusal refuse_head(const httplib::Request& req, const ServerState& state,
                        const std::string& api_key);

class RequestIntake {
 public:
  RequestIntake(size_t max_body_bytes, RequestMemory& memory)
      : max_body_bytes_(max_body_bytes), memory_(memory) {}

  // The body as it arrives (Content-Length or chunked), refused past max_body_bytes. Its
  // buffer is reserved in the request memory before it grows (503 when that is full). What is
  // left of a refused body is not read: the connection closes after the reply.
  std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                        httplib::Response& res, RequestMemory::Reservation& held) const;
  // Reserves what the body's JSON document will hold once parsed, before parsing it: 413 when
  // no request could have it, 503 when others hold the memory now.
  void reserve_document(const std::string& body, RequestMemory::Reservation& held) const;
  // Reserves `bytes` that `what` ("the answer", "its grammar") will hold before it is built:
  // 413 when no request could have them, 503 when others hold the memory now.
  void reserve(uint64_t bytes, const char* what, RequestMemory::Reservation& held) const;
  // What a chat template's render may borrow from the request's memory as it builds: at most
  // an eighth of the budget (a render past that is far beyond any context; others keep theirs).
  jinja::RenderLimits lend_to_render(RequestMemory::Reservation& held) const;

 private:
  [[noreturn]] void memory_busy() const;

  size_t max_body_bytes_;
  RequestMemory& memory_;
};

}  // namespace strata
