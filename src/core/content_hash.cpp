#include "core/content_hash.h"

#include <fmt/format.h>

#include <cstring>

namespace strata {

namespace {
uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}
}  // namespace

uint64_t content_hash(const uint8_t* data, uint64_t size) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t lane[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
                      0x632be59bd9b4e019ull};
  uint64_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, data + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * kPrime;
    }
  uint64_t h = mix(size);
  for (; i < size; ++i) h = (h ^ data[i]) * kPrime;
  for (uint64_t l : lane) h = mix(h ^ mix(l));
  return h;
}

std::string content_hash_hex(const uint8_t* data, uint64_t size) {
  return fmt::format("{:016x}", content_hash(data, size));
}

}  // namespace strata
