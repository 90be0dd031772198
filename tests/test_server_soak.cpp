// A bounded soak of the server on loopback: slow, idle, malformed and disconnecting clients
// hammer it for a few seconds while two normal clients keep asking for completions. Every normal
// request must succeed in time, and the process must not grow (what the bad clients cost is
// given back when they go). SOAK_KINDS (letters s, i, m, e: slow, idle, malformed,
// disconnecting; default all) picks the bad clients and SOAK_LOG=1 logs every request, to study
// one kind at a time.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "server_fixture.h"

namespace strata {
namespace {

using namespace strata::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Under a sanitizer the model runs 5-30x slower and the allocator keeps freed memory in
// quarantine (ASan) or shadow (TSan): the latency bound is scaled, and leaks are LeakSanitizer's
// to find rather than the RSS comparison's.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) / 1048576.0;
}

class ServerSoak : public ServerHttp {
 protected:
  // One round of every kind of bad client, until `stop`.
  void slow_client(const std::atomic<bool>& stop) {
    while (!stop) {
      RawConnection c(port_);
      const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n";
      for (size_t i = 0; i < req.size() && !stop && c.send(req.substr(i, 1)); ++i)
        std::this_thread::sleep_for(100ms);
    }
  }
  void idle_client(const std::atomic<bool>& stop) {
    while (!stop) {
      RawConnection c(port_);
      c.read_all(1500ms);  // sends nothing; the server closes it after the idle timeout
    }
  }
  void malformed_client(const std::atomic<bool>& stop, unsigned seed) {
    const std::string bad[] = {"NONSENSE\r\n\r\n",
                               "GET /" + std::string(9000, 'x') + " HTTP/1.1\r\n\r\n",
                               "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n{",
                               "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "zz\r\n",
                               "GET /health HTTP/1.1\r\nHost: x\r\n" + std::string(5000, 'h'),
                               std::string("\0\xff\r\n\r\n", 6)};
    for (unsigned i = seed; !stop; ++i) {
      RawConnection c(port_);
      c.send(bad[i % std::size(bad)]);
      c.read_all(200ms);
    }
  }
  void disconnecting_client(const std::atomic<bool>& stop) {
    const std::string body = R"({"prompt": "And God said", "max_tokens": 48, "stream": true})";
    while (!stop) {
      RawConnection c(port_);
      c.send(
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body);
      c.read_all(5ms);  // a little of the stream, then gone
    }
  }
};

TEST_F(ServerSoak, NormalClientsAreServedInTimeAmongBadOnesAndNothingLeaks) {
  restart([](ServerOptions& o) {
    o.connections.receive_timeout = 1000ms;
    o.connections.idle_timeout = 1000ms;
    o.log_requests = getenv("SOAK_LOG") != nullptr;
  });
  auto normal_request = [&](httplib::Client& c) {
    const auto t0 = Clock::now();
    const auto res = c.Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 8})",
                            "application/json");
    const bool ok = res && res->status == 200 &&
                    nlohmann::json::parse(res->body)["usage"]["completion_tokens"] == 8;
    return std::make_pair(ok, Clock::now() - t0);
  };
  {  // warm-up: the first requests allocate what stays (buffers, the KV cache's pages)
    httplib::Client c("127.0.0.1", port_);
    c.set_bearer_token_auth("sesame");
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(normal_request(c).first);
  }
  const double rss_before = rss_mib();

  std::atomic<bool> stop{false};
  std::vector<std::thread> bad;
  const std::string kinds = getenv("SOAK_KINDS") ? getenv("SOAK_KINDS") : "sime";
  if (kinds.find('s') != std::string::npos)
    for (int i = 0; i < 4; ++i) bad.emplace_back([&] { slow_client(stop); });
  if (kinds.find('i') != std::string::npos)
    for (int i = 0; i < 4; ++i) bad.emplace_back([&] { idle_client(stop); });
  if (kinds.find('m') != std::string::npos)
    for (unsigned i = 0; i < 4; ++i) bad.emplace_back([&, i] { malformed_client(stop, i); });
  if (kinds.find('e') != std::string::npos)
    for (int i = 0; i < 2; ++i) bad.emplace_back([&] { disconnecting_client(stop); });

  std::atomic<int> served{0}, failed{0};
  std::vector<Clock::duration> latencies[2];
  std::vector<std::thread> normal;
  for (int n = 0; n < 2; ++n)
    normal.emplace_back([&, n] {
      httplib::Client c("127.0.0.1", port_);
      c.set_bearer_token_auth("sesame");
      c.set_read_timeout(10);
      const auto end = Clock::now() + 4s;
      while (Clock::now() < end) {
        const auto [ok, took] = normal_request(c);
        (ok ? served : failed)++;
        latencies[n].push_back(took);
      }
    });
  for (auto& t : normal) t.join();
  stop = true;
  for (auto& t : bad) t.join();

  std::vector<Clock::duration> all = latencies[0];
  all.insert(all.end(), latencies[1].begin(), latencies[1].end());
  std::sort(all.begin(), all.end());
  ASSERT_FALSE(all.empty());
  const double p50 = std::chrono::duration<double, std::milli>(all[all.size() / 2]).count();
  const double worst = std::chrono::duration<double, std::milli>(all.back()).count();
  std::printf("soak: %d normal requests served, %d failed, p50 %.1f ms, max %.1f ms\n",
              served.load(), failed.load(), p50, worst);
  EXPECT_EQ(failed, 0);
  EXPECT_GE(served, kSanitized ? 4 : 20);
  EXPECT_LT(worst, kSanitized ? 30000.0 : 3000.0)
      << "a normal request waited behind the bad clients";

  // Give the server a moment to close what the bad clients left, then compare.
  std::this_thread::sleep_for(1500ms);
  const double rss_after = rss_mib();
  std::printf("soak: RSS %.1f MiB before, %.1f MiB after\n", rss_before, rss_after);
  if (!kSanitized) {
    EXPECT_LT(rss_after - rss_before, 32.0);
  }
}

}  // namespace
}  // namespace strata
