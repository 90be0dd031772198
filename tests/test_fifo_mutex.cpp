// FifoMutex admits waiters in the order they arrived (the server's requests take turns with
// it), and excludes like a mutex.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/fifo_mutex.h"

namespace strata {
namespace {

TEST(FifoMutex, WaitersGetTheirTurnInArrivalOrder) {
  FifoMutex m;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  m.lock();
  for (int i = 0; i < 6; ++i) {
    waiters.emplace_back([&, i] {
      std::lock_guard<FifoMutex> turn(m);
      order.push_back(i);
    });
    // Thread i takes its ticket before thread i + 1 starts.
    while (m.arrivals() < static_cast<uint64_t>(i) + 2) std::this_thread::yield();
  }
  m.unlock();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(FifoMutex, ExcludesLikeAMutex) {
  FifoMutex m;
  int64_t counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        std::lock_guard<FifoMutex> turn(m);
        ++counter;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 80000);
}

}  // namespace
}  // namespace strata
