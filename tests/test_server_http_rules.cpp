// The server's HTTP rules found missing by the second probe (issue 29): the request head is
// bounded before anything is built from it (431), JSON nesting and the memory a body's document
// takes are bounded before parsing, a half-closed client gets its whole answer, framing headers
// that a proxy could read differently are refused, the Authorization scheme is read in any case.
// Each test failed before its fix.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "core/json_limits.h"
#include "server/http_rules.h"
#include "server/request_memory.h"
#include "server_fixture.h"

namespace strata {
namespace {

using namespace strata::testing;
using namespace std::chrono_literals;

std::string talk(int port, const std::string& bytes, bool half_close = false,
                 std::chrono::milliseconds timeout = 10s) {
  RawConnection c(port);
  EXPECT_TRUE(c.connected());
  c.send(bytes);
  if (half_close) c.shutdown_write();
  return c.read_all(timeout);
}

std::string headers_of(size_t count, size_t value_bytes) {
  std::string h;
  for (size_t i = 0; i < count; ++i)
    h += "X-" + std::to_string(i) + ": " + std::string(value_bytes, 'v') + "\r\n";
  return h;
}

// Was: a 9 MB head of tiny headers grew the server by ~22x its size before the key was
// checked, and kept it.
TEST_F(ServerHttp, RequestHeadsOverTheLimitsAre431BeforeParsing) {
  const std::string body = R"({"prompt": "a", "max_tokens": 1})";
  const ConnectionLimits limits;
  // Within the limits: served.
  EXPECT_EQ(status_of(talk(
                port_, request("/v1/completions", body, headers_of(limits.max_headers - 6, 10)))),
            200);
  const std::string many =
      talk(port_, request("/v1/completions", body, headers_of(limits.max_headers + 1, 1)));
  EXPECT_EQ(status_of(many), 431) << many;
  EXPECT_NE(body_of(many)["error"]["message"].get<std::string>().find("headers"),
            std::string::npos);
  const std::string long_line =
      talk(port_, request("/v1/completions", body, headers_of(1, limits.max_header_line_bytes)));
  EXPECT_EQ(status_of(long_line), 431) << long_line;
  // 5 headers of 7 KB each: every line fits, the head does not.
  const std::string large = talk(port_, request("/v1/completions", body, headers_of(5, 7000)));
  EXPECT_EQ(status_of(large), 431) << large;
  // Without the key too: the limits apply before authentication.
  const std::string anonymous =
      talk(port_, "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + headers_of(20000, 1) + "\r\n");
  EXPECT_EQ(status_of(anonymous), 431) << anonymous.substr(0, 200);
  // The server still answers.
  post("/v1/completions", body, 200);
}

// Was: 8 million '[' (8 MB) peaked at 617 MiB in the JSON parser.
TEST_F(ServerHttp, DeeplyNestedJsonIsRefusedBeforeParsing) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  auto e = post("/v1/completions", deep, 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("100 deep"), std::string::npos) << e;
  // Within the depth, the field check answers as before.
  e = post("/v1/completions", R"({"prompt": "a", "stop": [[[["x"]]]]})", 400);
  EXPECT_EQ(e["error"]["param"], "stop");
}

// A body whose document would not fit the server's request memory is refused (413) before it
// is parsed; one that fits is served.
TEST_F(ServerHttp, BodiesWhoseDocumentExceedsTheRequestMemoryAre413) {
  restart([](ServerOptions& o) { o.request_memory_bytes = 2 * o.max_body_bytes; });
  std::string ids;
  for (int i = 0; i < 1500; ++i) ids += (i ? ",1" : "1");
  const auto e = post("/v1/completions", R"({"prompt": [)" + ids + "]}", 413);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("JSON values"), std::string::npos) << e;
  post("/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 1})", 200);
}

TEST(HttpRules, FramingAndKeyRules) {
  httplib::Request r;
  r.method = "POST";
  EXPECT_TRUE(lacks_length(r));
  r.headers.emplace("Content-Length", "12");
  EXPECT_FALSE(lacks_length(r));
  EXPECT_EQ(framing_problem(r), "");
  r.headers.emplace("content-length", "12");  // names are case-insensitive: a duplicate
  EXPECT_NE(framing_problem(r).find("more than one Content-Length"), std::string::npos);
  httplib::Request both;
  both.headers.emplace("Content-Length", "3");
  both.headers.emplace("Transfer-Encoding", "chunked");
  EXPECT_NE(framing_problem(both).find("both"), std::string::npos);
  for (const char* bad : {"", "+3", "3 ", "0x10", "1234567890123456789"}) {
    httplib::Request x;
    x.headers.emplace("Content-Length", bad);
    EXPECT_NE(framing_problem(x), "") << "'" << bad << "'";
  }
  EXPECT_TRUE(bearer_matches("Bearer sesame", "sesame"));
  EXPECT_TRUE(bearer_matches("bEaReR   sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer sesam", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearersesame", "sesame"));
  EXPECT_FALSE(bearer_matches("Basic sesame", "sesame"));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
  EXPECT_TRUE(equals_ignoring_case("Chunked", "chunked"));
  EXPECT_FALSE(equals_in_constant_time("abc", "abd"));
  EXPECT_TRUE(equals_in_constant_time("abc", "abc"));
}

TEST(RequestMemory, ReservationsNeverExceedTheBudgetAndReturnWhenDone) {
  RequestMemory pool(100);
  {
    RequestMemory::Reservation a(pool), b(pool);
    EXPECT_TRUE(a.grow(60));
    EXPECT_FALSE(b.grow(41));  // 101 > 100: nothing taken
    EXPECT_EQ(pool.in_use(), 60u);
    EXPECT_TRUE(b.grow(40));
    EXPECT_FALSE(a.grow(1));
    EXPECT_EQ(a.held() + b.held(), 100u);
  }
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(JsonLimits, ShapeCountsDepthAndValuesOutsideStrings) {
  const JsonShape s = measure_json(R"({"a": [1, 2, {"b": "[[[,,,\"]]"}], "c": null})");
  EXPECT_EQ(s.depth, 3);
  // Separators (3 ':' and 3 ',') plus 3 containers plus the last scalar: an upper bound on
  // the 8 values and members.
  EXPECT_GE(s.values, 8u);
  EXPECT_LE(s.values, 12u);
  EXPECT_EQ(measure_json("5").values, 1u);
  EXPECT_EQ(measure_json("").values, 0u);
  EXPECT_EQ(measure_json(std::string(1000, '[')).depth, 1000);
  EXPECT_THROW(parse_json_bounded(std::string(65, '[') + std::string(65, ']'), "x"), Error);
  EXPECT_EQ(parse_json_bounded(std::string(64, '[') + std::string(64, ']'), "x").size(), 1u);
}

// Was: a client that half-closed after its request (`nc -N`, some proxies) got 200 OK with an
// empty body, streaming or not: the FIN was taken for a disconnect.
TEST_F(ServerHttp, HalfClosedClientsGetTheWholeAnswer) {
  const std::string whole =
      talk(port_,
           request("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 6})",
                   "Connection: close\r\n"),
           /*half_close=*/true);
  EXPECT_EQ(status_of(whole), 200) << whole;
  EXPECT_EQ(body_of(whole)["usage"]["completion_tokens"], 6) << whole;
  const std::string streamed =
      talk(port_,
           request("/v1/completions",
                   R"({"prompt": "In the beginning", "max_tokens": 6, "stream": true})",
                   "Connection: close\r\n"),
           /*half_close=*/true);
  EXPECT_EQ(status_of(streamed), 200) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed;
}

// Was: two different Content-Length headers were accepted (the first won), "Chunked" was 501,
// "bearer KEY" was 401.
TEST_F(ServerHttp, FramingHeadersAProxyCouldReadDifferentlyAreRefused) {
  const std::string body = R"({"prompt": "a", "max_tokens": 1})";
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n";
  const std::string twice = talk(port_, head + "Content-Length: " + std::to_string(body.size()) +
                                            "\r\nContent-Length: 5\r\n\r\n" + body);
  EXPECT_EQ(status_of(twice), 400) << twice;
  EXPECT_NE(twice.find("more than one Content-Length"), std::string::npos) << twice;
  EXPECT_EQ(twice.find("HTTP/1.1", 1), std::string::npos) << "answered the smuggled rest";
  const std::string both = talk(port_, head + "Content-Length: " + std::to_string(body.size()) +
                                           "\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
  EXPECT_EQ(status_of(both), 400) << both;
  for (const char* bad : {"+5", "5a", "-1", " "}) {
    const std::string r = talk(port_, head + "Content-Length: " + bad + "\r\n\r\n" + body);
    EXPECT_EQ(status_of(r), std::string(bad) == " " ? 411 : 400) << bad << ": " << r;
  }
  // Was: no length at all, and the body was read until the deadline, then no answer.
  EXPECT_EQ(status_of(talk(port_, head + "\r\n" + body, false, 3s)), 411);
  const std::string chunked =
      talk(port_, head + "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n" +
                      fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
  EXPECT_EQ(status_of(chunked), 200) << chunked;
  auto with_authorization = [&](const std::string& value) {
    return talk(port_, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: " + value +
                           "\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\nConnection: close\r\n\r\n" + body);
  };
  const std::string lower = with_authorization("bearer sesame");
  EXPECT_EQ(status_of(lower), 200) << lower;
  const std::string wrong = with_authorization("Bearer sesamE");
  EXPECT_EQ(status_of(wrong), 401) << wrong;
}

}  // namespace
}  // namespace strata
