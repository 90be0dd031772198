// The flash layout of an FFN ("row-column bundling", LLM in a Flash): neuron i's gate row, up
// row and ffn_down_t row stored together, padded to a multiple of 4 KiB, so one aligned read
// (O_DIRECT-able) fetches everything the neuron needs. Per layer the bundles form one tensor
// `blk.N.ffn_bundles` ([bundle_bytes, n_ff] of I8) in a GGUF file aligned to 4 KiB; the offsets
// inside a bundle are metadata.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace strata {

inline constexpr uint64_t kBundleAlign = 4096;

// `bytes` rounded up to a whole number of kBundleAlign (a bundle's stride).
inline constexpr uint64_t padded_to_bundle_align(uint64_t bytes) {
  return (bytes + kBundleAlign - 1) / kBundleAlign * kBundleAlign;
}
inline constexpr const char* kBundleBytesKey = "strata.bundle.bytes";
inline constexpr const char* kBundleTypeKey = "strata.bundle.type";  // GGUF type id of the rows
// The same type by name: a second record of it, so that an edited or damaged type id (F16 read
// as BF16 has the same bundle size) is refused at load instead of computing garbage. Files
// bundled before it was written lack it.
inline constexpr const char* kBundleTypeNameKey = "strata.bundle.type_name";
// content_hash_hex of the file the bundles were made from: profiles of that file (whose hash
// they carry) apply to the bundled one.
inline constexpr const char* kBundleSourceHashKey = "strata.bundle.source_hash";

struct BundleLayout {
  DType type = DType::F32;
  int64_t n_embd = 0, n_ff = 0;
  bool has_gate = true;
  uint64_t row_bytes = 0;     // one gate/up/down_t row
  uint64_t bundle_bytes = 0;  // stride between neurons, a multiple of kBundleAlign
  uint64_t gate_offset() const { return 0; }
  uint64_t up_offset() const { return has_gate ? row_bytes : 0; }
  uint64_t down_offset() const { return up_offset() + row_bytes; }
  uint64_t payload_bytes() const { return down_offset() + row_bytes; }
  // The aligned start of a bundle that holds its first row (gate, or up without a gate): the
  // row that decides whether the neuron is zero. Equal to bundle_bytes when nothing is saved by
  // reading it alone.
  uint64_t head_bytes() const {
    return padded_to_bundle_align(row_bytes);
  }

  static BundleLayout make(DType type, int64_t n_embd, int64_t n_ff, bool has_gate) {
    BundleLayout l{type, n_embd, n_ff, has_gate, row_bytes_of(type, n_embd), 0};
    l.bundle_bytes = padded_to_bundle_align(l.payload_bytes());
    return l;
  }

 private:
  static uint64_t row_bytes_of(DType type, int64_t n) {
    return strata::row_bytes(type, static_cast<uint64_t>(n));
  }
};

}  // namespace strata
