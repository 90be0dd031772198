// The server against clients that misbehave (the defects found by probing it): bodies over the
// limit however they are encoded, compressed bodies, slow and idle clients, pipelined requests,
// a second server on the same port, malformed HTTP, JSON values out of range. Each test failed
// before the fix it names.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server_fixture.h"

namespace strata {
namespace {

using namespace strata::testing;
using namespace std::chrono_literals;

// Was: the limit was checked against Content-Length only, so a chunked body of any size was
// read whole.
TEST_F(ServerHttp, ChunkedBodyOverTheLimitIs413) {
  const std::string big =
      R"({"prompt": "a", "max_tokens": 1, "user": ")" + std::string(6000, 'x') + R"("})";
  const auto res = client_->Post(
      "/v1/completions",
      [&](size_t offset, httplib::DataSink& sink) {
        sink.write(big.data() + offset, std::min<size_t>(1000, big.size() - offset));
        if (offset + 1000 >= big.size()) sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_TRUE(nlohmann::json::parse(res->body)["error"]["message"].is_string());
  // A chunked body within the limit is served.
  const std::string small = R"({"prompt": "a", "max_tokens": 1})";
  const auto ok = client_->Post(
      "/v1/completions",
      [&](size_t offset, httplib::DataSink& sink) {
        sink.write(small.data(), small.size());
        sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// Was: a 510 KB gzip body was inflated to 512 MiB before any limit applied.
TEST_F(ServerHttp, CompressedBodiesAreRefusedUnread) {
  RawConnection c(port_);
  ASSERT_TRUE(c.connected());
  c.send(request("/v1/completions", std::string(100, '\x1f'), "Content-Encoding: gzip\r\n"));
  const std::string r = c.read_all(5s);
  EXPECT_EQ(status_of(r), 415) << r;
  EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("gzip"), std::string::npos);
}

// Was: httplib's read timeout restarts at every byte, so a client sending one header byte every
// few seconds held its worker indefinitely (8 of them left /health unanswered for 19 s).
TEST_F(ServerHttp, ClientsThatTrickleTheirRequestAreCutAtTheDeadline) {
  restart([](ServerOptions& o) { o.connections.receive_timeout = 1000ms; });
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 8; ++i) slow.push_back(std::make_unique<RawConnection>(port_));
  const auto start = std::chrono::steady_clock::now();
  bool all_closed = false;
  const std::string header = request("/v1/completions", R"({"prompt": "a"})");
  for (size_t i = 0; i < header.size() && !all_closed; ++i) {
    all_closed = true;
    for (auto& c : slow) all_closed = !c->send(header.substr(i, 1)) && all_closed;
    // /health stays answered meanwhile.
    if (i == 2) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto h = client_->Get("/health");
      ASSERT_TRUE(h);
      EXPECT_EQ(h->status, 200);
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
    }
    std::this_thread::sleep_for(200ms);
    if (std::chrono::steady_clock::now() - start > 6s) break;
  }
  // The server closed each slow connection once its second had passed.
  for (auto& c : slow) {
    bool closed = false;
    c->read_all(100ms, &closed);
    EXPECT_TRUE(closed || all_closed) << "a trickling client is still connected after "
                                      << (std::chrono::steady_clock::now() - start) / 1ms << " ms";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// Was: each request got a fresh read buffer, so requests the client had already sent on the
// connection behind the first were dropped.
TEST_F(ServerHttp, PipelinedRequestsAreAllAnswered) {
  RawConnection c(port_);
  ASSERT_TRUE(c.connected());
  const std::string one = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  c.send(one + one +
         "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n"
         "Connection: close\r\n\r\n");
  bool closed = false;
  const std::string r = c.read_all(10s, &closed);
  EXPECT_TRUE(closed);
  size_t responses = 0;
  for (size_t pos = 0; (pos = r.find("HTTP/1.1 200", pos)) != std::string::npos; ++pos) ++responses;
  EXPECT_EQ(responses, 3u) << r;
  EXPECT_NE(r.find("\"tiny\""), std::string::npos);
}

// Was: the socket had SO_REUSEPORT, so a second server bound the same port and took half of
// its traffic.
TEST_F(ServerHttp, ASecondServerOnTheSamePortFailsToBind) {
  Session s(*model_, 16, pool_);
  ServerOptions o;
  o.port = port_;
  o.log_requests = false;
  HttpServer second(*model_, s, o);
  try {
    second.bind();
    ADD_FAILURE() << "a second server bound port " << port_;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen"), std::string::npos);
  }
}

// Was: httplib's backlog of 5, so bursts of connections were refused or delayed by the kernel.
// Reads the listening socket's backlog from `ss` (iproute2) where the machine has it.
TEST_F(ServerHttp, ListenBacklogIsWide) {
  FILE* p = ::popen(("ss -ltnH 'sport = :" + std::to_string(port_) + "' 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[512] = {};
  const bool got = std::fgets(line, sizeof(line), p) != nullptr;
  ::pclose(p);
  if (!got) GTEST_SKIP() << "no ss on this machine: the backlog is not checked";
  // "LISTEN 0 512 127.0.0.1:port ...": the third field is the backlog.
  char state[32];
  unsigned recv_q = 0, backlog = 0;
  ASSERT_EQ(std::sscanf(line, "%31s %u %u", state, &recv_q, &backlog), 3) << line;
  EXPECT_GE(backlog, 128u) << line;
}

// Was: the limit check came after tokenizing the whole prompt (7 MB took ~524 MB).
TEST_F(ServerHttp, APromptThatCannotFitIsRefusedBeforeTokenizing) {
  const auto e =
      post("/v1/completions", nlohmann::json{{"prompt", std::string(3000, 'a')}}.dump(), 400);
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("at least"), std::string::npos)
      << e["error"]["message"];
}

// Was: 500 (uncaught JSON exceptions), or an empty prompt that ran.
TEST_F(ServerHttp, ClientMistakesAre400NamingTheField) {
  auto e = post("/v1/completions", R"({"prompt": "a", "temperature": 1e400})", 400);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  e = post("/v1/completions", R"({"prompt": "a", "max_tokens": 1e400})", 400);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  e = post("/v1/completions",
           R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": "yes"}})", 400);
  EXPECT_EQ(e["error"]["param"], "stream_options.include_usage");
  e = post("/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": [{"type": 7, "text": "hi"}]}]})", 400);
  EXPECT_EQ(e["error"]["param"], "messages[0].content");
  e = post("/v1/completions", R"({"prompt": [[]]})", 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
}

// httplib's own 400 and 414 replies are JSON, and the connection closes after them. Was: it
// stayed open and the rest of the malformed bytes were answered as further requests.
TEST_F(ServerHttp, HttpLevelErrorsAreJsonAndCloseTheConnection) {
  for (const std::string& bad :
       {std::string("NONSENSE\r\n\r\n"),
        "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    RawConnection c(port_);
    c.send(bad);
    bool closed = false;
    const std::string r = c.read_all(3s, &closed);
    EXPECT_EQ(status_of(r), bad[0] == 'N' ? 400 : 414) << r;
    EXPECT_TRUE(closed);
    EXPECT_EQ(r.find("HTTP/1.1", 1), std::string::npos) << "more than one response: " << r;
    EXPECT_TRUE(body_of(r)["error"]["message"].is_string()) << r;
  }
}

}  // namespace
}  // namespace strata
