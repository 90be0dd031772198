// A fast 64-bit content hash (four interleaved multiply-xor lanes over 8-byte words, then
// mixed): ties sidecar files (profiles) to the exact model bytes they were made from. Not
// cryptographic; it detects a different or modified model, which is all it is for.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

uint64_t content_hash(const uint8_t* data, uint64_t size);
std::string content_hash_hex(const uint8_t* data, uint64_t size);

}  // namespace strata
