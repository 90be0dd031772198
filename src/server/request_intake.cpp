#include "server/request_intake.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/json_limits.h"
#include "server/guarded_http.h"
#include "server/http_rules.h"
#include "server/openai_api.h"

namespace strata {

namespace {

bool is_page(const std::string& path) {
  return path == "/" || path == "/index.html";
}

}  // namespace

HeadRefusal refuse_head(const httplib::Request& req, const ServerState& state,
                        const std::string& api_key) {
  // A compressed body would be inflated by httplib before any limit applies (510 KB of
  // gzip made 512 MiB); clients of this API send JSON as it is.
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity")
    return {415, fmt::format("Content-Encoding '{}' is not accepted; send the body uncompressed",
                             encoding.substr(0, 64))};
  if (const std::string problem = framing_problem(req); !problem.empty()) return {400, problem};
  if (lacks_length(req))
    return {411,
            "the request has a body but neither Content-Length nor Transfer-Encoding: chunked"};
  const std::string transfer = req.get_header_value("Transfer-Encoding");
  if (!transfer.empty() && !equals_ignoring_case(transfer, "chunked"))
    return {501, fmt::format("Transfer-Encoding '{}' is not supported (chunked is)",
                             transfer.substr(0, 64))};
  // Loading: only /health (503 "loading") and the page answer; the rest need the model.
  if (!state.ready && req.path != "/health" && !is_page(req.path))
    return {503, "the model is still loading; retry shortly"};
  // Draining (SIGTERM): what is running finishes, nothing new starts; /health says so.
  if (state.draining && req.path != "/health" && req.path != "/metrics")
    return {503, "the server is shutting down; retry on another replica"};
  // Every route but /health and the page (static, no secrets: it asks for the key) needs the
  // key when there is one.
  if (api_key.empty() || req.path == "/health" || is_page(req.path)) return {};
  if (req.get_header_value_count("Authorization") == 1 &&
      bearer_matches(req.get_header_value("Authorization"), api_key))
    return {};
  return {401, "missing or wrong API key (send \"Authorization: Bearer <key>\")"};
}

void RequestIntake::memory_busy() const {
  throw ApiError(503,
                 fmt::format("the server's request memory ({} MiB) is held by other requests; "
                             "retry later",
                             memory_.budget() >> 20),
                 "", "overloaded");
}

std::string RequestIntake::read_body(const httplib::Request& req,
                                     const httplib::ContentReader& reader, httplib::Response& res,
                                     RequestMemory::Reservation& held) const {
  std::string body;
  bool over = false, busy = false;
  auto room_for = [&](size_t size) {  // the buffer holds `size` bytes, reserved first
    if (size <= body.capacity()) return true;
    const size_t capacity = std::min(std::max(size, 2 * body.capacity()), max_body_bytes_);
    if (!held.grow(capacity - body.capacity())) return false;
    body.reserve(capacity);
    return true;
  };
  // The declared length is reserved whole (httplib has refused one over the limit).
  const size_t declared = static_cast<size_t>(
      std::min<uint64_t>(req.get_header_value<uint64_t>("Content-Length"), max_body_bytes_));
  if (!room_for(declared)) busy = true;
  const bool read = !busy && reader([&](const char* data, size_t n) {
    if (body.size() + n > max_body_bytes_) {
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
  if (over || busy || !read) GuardedServer::close_after_response(res);
  if (busy) memory_busy();
  // httplib itself refuses a Content-Length over the limit (status 413) before reading.
  if (over || (!read && res.status == 413))
    throw ApiError(413, fmt::format("the request body is over {} bytes", max_body_bytes_));
  if (!read) throw ApiError(400, "the request body ended early or took too long to arrive");
  return body;
}

void RequestIntake::reserve_document(const std::string& body,
                                     RequestMemory::Reservation& held) const {
  const JsonShape shape = measure_json(body);
  check_json_depth(shape, "the request body");  // an Error: 400
  const uint64_t bytes = shape.document_bytes();
  if (bytes > memory_.budget() - std::min(memory_.budget(), held.held()))
    throw ApiError(413, fmt::format("the request body has about {} JSON values, which would "
                                    "take {} MiB parsed; the server holds at most {} MiB for "
                                    "requests",
                                    shape.values, bytes >> 20, memory_.budget() >> 20));
  if (!held.grow(bytes)) memory_busy();
}

void RequestIntake::reserve(uint64_t bytes, const char* what, RequestMemory::Reservation& held) const {
  if (bytes > memory_.budget() - std::min(memory_.budget(), held.held()))
    throw ApiError(413, fmt::format("{} would take {} MiB; the server holds at most {} MiB for "
                                    "requests",
                                    what, bytes >> 20, memory_.budget() >> 20));
  if (!held.grow(bytes)) memory_busy();
}

jinja::RenderLimits RequestIntake::lend_to_render(RequestMemory::Reservation& held) const {
  return {[&held](uint64_t bytes) { return held.grow(bytes); },
          std::max<uint64_t>(memory_.budget() / 8, uint64_t{1} << 20)};
}

}  // namespace strata
