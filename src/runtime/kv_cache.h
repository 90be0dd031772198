// A sequence's KV cache on the backend's device: per layer [n_ctx][n_head_kv * head_dim]
// keys and values of the chosen element types, allocated (and populated) up front so decode
// only writes. bytes() is what the constructor allocates: the placement inventory uses it.
#pragma once

#include <cstdint>

#include "backends/backend.h"
#include "model/config.h"

namespace strata {

// The KV cache's element types (llama.cpp's -ctk / -ctv): F32, F16, or llama.cpp's Q8_0 and Q4_0
// blocks along each row (a head whole blocks). One value from the flags through planning to the
// session.
struct KvTypes {
  DType k = DType::F32, v = DType::F32;
  bool operator==(const KvTypes&) const = default;
};

}  // namespace strata

namespace strata {

class KvCache {
 public:
  // Fails with a one-line message when the cache cannot be allocated (naming -c).
  // `layers`: how many layers it holds (a session whose layers run on two devices has a cache on
  // each); <= 0: all of the model's.
  KvCache(Backend& backend, const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
          int64_t layers = 0);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  static uint64_t bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
                        int64_t layers = 0);
  // Fails naming the flag when a type is not a KV cache type or splits this model's heads.
  static void check_types(const ModelConfig& c, DType k_type, DType v_type);
  uint64_t bytes() const { return k_.bytes + v_.bytes; }
  KvLayer layer(int64_t l) const;
  // Rows [from, from + n) of every layer's keys and values copied to rows [to, to + n).
  void copy_rows(int64_t from, int64_t to, int64_t n);

 private:
  Backend& backend_;
  Buffer k_, v_;
  DType k_type_, v_type_;
  int64_t n_ctx_, kv_dim_, n_layer_;
};

}  // namespace strata
