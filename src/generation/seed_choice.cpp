#include "generation/seed_choice.h"

#include <atomic>
#include <chrono>
#include <random>

namespace strata {

uint64_t fresh_seed() {
  // random_device may be deterministic on some platforms: the clock and a counter keep two
  // draws in one process apart even there.
  static std::atomic<uint64_t> counter{0};
  std::random_device device;
  const uint64_t entropy = (static_cast<uint64_t>(device()) << 32) ^ device();
  const auto now = static_cast<uint64_t>(
      std::chrono::high_resolution_clock::now().time_since_epoch().count());
  uint64_t z = entropy ^ now ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
  // splitmix64's finaliser: every input bit reaches every output bit.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace strata
