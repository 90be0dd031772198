// Base64 (RFC 4648, with padding): how OpenAI's embeddings endpoint sends vectors when asked
// for encoding_format "base64" (the float32 values' little-endian bytes), which its clients ask
// for by default.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace strata {

std::string base64_encode(std::span<const uint8_t> bytes);

}  // namespace strata
