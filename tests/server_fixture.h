// The HTTP server on a free local port of this machine, for the server tests: an httplib client
// and raw sockets (for what a client library would never send).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/thread_pool.h"
#include "model/model.h"
#include "generation/generator.h"
#include "runtime/session.h"
#include "server/http_server.h"

namespace strata::testing {

inline std::string shipped_model() {
  return std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf";
}

inline GenerationParams greedy(int64_t max_tokens) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  return p;
}

// A TCP connection to 127.0.0.1:port that sends bytes as given and reads what comes back.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // What is received until `marker` appears (when not empty), the server closes or `timeout`
  // passes; `closed` tells whether the server closed.
  std::string read_until(const std::string& marker, std::chrono::milliseconds timeout,
                         bool* closed = nullptr) {
    std::string out;
    if (closed) *closed = false;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (marker.empty() || out.find(marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        if (closed) *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Ends the sending side (a FIN): the client has sent its request and still reads the answer.
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Everything received until the server closes or `timeout` passes; `closed` tells which.
  std::string read_all(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    return read_until("", timeout, closed);
  }

 private:
  int fd_;
  bool connected_ = false;
};

inline std::string request(const std::string& path, const std::string& body,
                           const std::string& extra_headers = "") {
  return "POST " + path +
         " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\nContent-Type: "
         "application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

inline int status_of(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(response.substr(9, 3)) : -1;
}

// The JSON body of the first response in `response` (Content-Length framed).
inline nlohmann::json body_of(const std::string& response) {
  const size_t start = response.find("\r\n\r\n");
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(response.substr(start + 4), nullptr, false);
}

// The HTTP API on a free local port, with an httplib client.
class ServerHttp : public ::testing::Test {
 protected:
  // Tests that need other options call restart() with a function that changes them.
  void SetUp() override { start(); }
  void start(const std::function<void(ServerOptions&)>& adjust = {}) {
    model_ = Model::load(model_path_);
    SessionOptions so;
    so.n_seq = slots_;
    server_.reset();  // its scheduler runs on the old session
    session_.reset();
    session_ = std::make_unique<Session>(*model_, slot_context_, pool_, so);
    ServerOptions o;
    o.port = 0;
    o.model_name = "tiny";
    o.api_key = "sesame";
    o.max_body_bytes = 4096;
    o.log_requests = false;
    o.defaults.sampling.temperature = 0;
    if (adjust) adjust(o);
    server_ = std::make_unique<HttpServer>(*model_, *session_, o);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->listen(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_bearer_token_auth("sesame");
    client_->set_read_timeout(60);
    // httplib's stop() does nothing before listen() has begun: wait for it to answer.
    for (int i = 0; i < 500 && !client_->Get("/health"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void TearDown() override { stop(); }
  void stop() {
    server_->stop();
    thread_.join();
  }
  void restart(const std::function<void(ServerOptions&)>& adjust) {
    stop();
    start(adjust);
  }
  nlohmann::json post(const std::string& path, const std::string& body, int expected_status) {
    const auto res = client_->Post(path, body, "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << path << " " << body << ": " << res->body;
    return nlohmann::json::parse(res->body);
  }

  std::string model_path_ = shipped_model();  // the model served (set before restart())
  int slots_ = 1;              // sequence slots of the session (set before restart())
  int64_t slot_context_ = 64;  // positions per slot
  ThreadPool pool_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace strata::testing
