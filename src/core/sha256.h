// SHA-256 (FIPS 180-4), incremental: what Hugging Face and Ollama name files and manifests by,
// so a downloaded model is checked against the hash its host publishes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

class Sha256 {
 public:
  Sha256();
  void update(const uint8_t* data, size_t size);
  void update(std::string_view text) { update(reinterpret_cast<const uint8_t*>(text.data()), text.size()); }
  // The digest, as 64 lower-case hex digits; the object is spent after it.
  std::string hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view text);

}  // namespace strata
