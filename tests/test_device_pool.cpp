// The CUDA backend's device memory pool (backends/cuda/device_pool.h) over a driver that counts
// what it gives: the budget holds as the driver counts it, buffers are aligned and reused, free
// neighbours merge, emptied chunks go back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "backends/cuda/device_pool.h"

namespace strata {
namespace {

// Hands out host memory and counts it, as a driver does, in whole granules.
struct CountingDriver {
  uint64_t given = 0, peak = 0;
  int chunks = 0;
  std::vector<std::pair<uint8_t*, uint64_t>> live;
  DeviceDriver driver() {
    return {[this](uint64_t bytes) -> uint8_t* {
              EXPECT_EQ(bytes % kDeviceGranule, 0u) << "a chunk that is not whole granules";
              auto* p = static_cast<uint8_t*>(std::aligned_alloc(kDeviceAlignment, bytes));
              given += bytes;
              peak = std::max(peak, given);
              ++chunks;
              live.emplace_back(p, bytes);
              return p;
            },
            [this](uint8_t* p) {
              for (size_t i = 0; i < live.size(); ++i)
                if (live[i].first == p) {
                  given -= live[i].second;
                  live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
                  break;
                }
              --chunks;
              std::free(p);
            }};
  }
};

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(DevicePool, AGivenBudgetIsTakenWholeAndNeverExceeded) {
  CountingDriver d;
  {
    DevicePool pool(9 * kMiB, true, d.driver(), true);
    EXPECT_EQ(d.given, 8 * kMiB) << "the budget rounded down to whole granules, taken at once";
    std::vector<uint8_t*> small;
    for (int i = 0; i < 1000; ++i) {
      uint8_t* p = pool.allocate(100);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kDeviceAlignment, 0u);
      small.push_back(p);
    }
    EXPECT_EQ(pool.in_use(), 1000 * kDeviceAlignment);
    EXPECT_EQ(d.given, 8 * kMiB) << "many small buffers share the chunk";
    EXPECT_EQ(pool.allocate(8 * kMiB), nullptr) << "more than is left";
    for (uint8_t* p : small) pool.release(p);
    EXPECT_EQ(pool.in_use(), 0u);
    EXPECT_NE(pool.allocate(8 * kMiB), nullptr) << "freed neighbours merge back into one range";
    EXPECT_EQ(d.peak, 8 * kMiB);
  }
  EXPECT_EQ(d.given, 0u);
}

TEST(DevicePool, WithoutABudgetItGrowsByGranulesAndGivesEmptyChunksBack) {
  CountingDriver d;
  DevicePool pool(64 * kMiB, false, d.driver(), true);
  EXPECT_EQ(d.given, 0u);
  uint8_t* a = pool.allocate(3 * kMiB);  // a chunk of 4 MiB
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(d.given, 4 * kMiB);
  uint8_t* b = pool.allocate(kMiB / 2);  // in the first chunk's tail
  EXPECT_EQ(d.given, 4 * kMiB);
  EXPECT_EQ(b, a + 3 * kMiB);
  uint8_t* c = pool.allocate(10 * kMiB);
  EXPECT_EQ(d.given, 14 * kMiB);
  EXPECT_EQ(pool.allocate(51 * kMiB), nullptr) << "past the limit";
  EXPECT_EQ(pool.largest_free(), 50 * kMiB);
  pool.release(c);
  EXPECT_EQ(d.given, 4 * kMiB) << "an emptied chunk goes back";
  pool.release(a);
  EXPECT_EQ(d.given, 4 * kMiB) << "b still lives in it";
  pool.release(b);
  EXPECT_EQ(d.given, 0u);
  EXPECT_EQ(d.chunks, 0);
}

TEST(DevicePool, BuffersNeverOverlap) {
  CountingDriver d;
  DevicePool pool(32 * kMiB, true, d.driver(), false);
  std::vector<std::pair<uint8_t*, uint64_t>> live;
  uint64_t seed = 7;
  for (int step = 0; step < 2000; ++step) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    if (!live.empty() && (seed >> 60) < 7) {
      const size_t i = (seed >> 20) % live.size();
      pool.release(live[i].first);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const uint64_t bytes = 1 + (seed >> 40) % (256 * 1024);
    uint8_t* p = pool.allocate(bytes);
    if (p == nullptr) continue;
    for (const auto& [q, n] : live) ASSERT_TRUE(p + bytes <= q || q + n <= p) << "overlap";
    live.emplace_back(p, bytes);
  }
  for (const auto& [p, n] : live) pool.release(p);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.largest_free(), 32 * kMiB);
}

}  // namespace
}  // namespace strata
