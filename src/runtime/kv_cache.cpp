#include "runtime/kv_cache.h"

#include <new>

#include "core/anonymous_memory.h"
#include "core/error.h"

namespace strata {

namespace {
uint64_t values(const ModelConfig& c, int64_t n_ctx, int64_t layers) {
  return static_cast<uint64_t>((layers > 0 ? layers : c.n_layer) * n_ctx * c.n_head_kv *
                               c.head_dim);
}
}  // namespace

uint64_t KvCache::bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
                        int64_t layers) {
  return values(c, n_ctx, layers) *
         (dtype_info(k_type).block_bytes + dtype_info(v_type).block_bytes);
}

KvCache::KvCache(Backend& backend, const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
                 int64_t layers)
    : backend_(backend),
      k_type_(k_type),
      v_type_(v_type),
      n_ctx_(n_ctx),
      kv_dim_(c.n_head_kv * c.head_dim),
      n_layer_(layers > 0 ? layers : c.n_layer) {
  const uint64_t need = bytes(c, n_ctx, k_type, v_type, n_layer_);
  if (backend.device() == Device::Host && need > AnonymousMemory::available())
    fail(
        "the KV cache for a context of {} tokens needs {:.2f} GB, more than the {:.2f} GB of "
        "memory available; lower -c (or --cache-type-k/-v f16)",
        n_ctx, static_cast<double>(need) / 1e9,
        static_cast<double>(AnonymousMemory::available()) / 1e9);
  try {
    k_ = backend.allocate(values(c, n_ctx, n_layer_) * dtype_info(k_type).block_bytes,
                          "the KV cache's keys");
    v_ = backend.allocate(values(c, n_ctx, n_layer_) * dtype_info(v_type).block_bytes,
                          "the KV cache's values");
  } catch (const Error&) {  // a device's budget: the message names the cache
    if (k_.data != nullptr) backend.release(k_);
    throw;
  } catch (const std::bad_alloc&) {
    if (k_.data != nullptr) backend.release(k_);
    fail("cannot allocate the KV cache for a context of {} tokens ({:.1f} GB); lower -c", n_ctx,
         static_cast<double>(need) / 1e9);
  }
}

KvCache::~KvCache() {
  backend_.release(k_);
  backend_.release(v_);
}

void KvCache::copy_rows(int64_t from, int64_t to, int64_t n) {
  const auto kb = static_cast<uint64_t>(kv_dim_) * dtype_info(k_type_).block_bytes;
  const auto vb = static_cast<uint64_t>(kv_dim_) * dtype_info(v_type_).block_bytes;
  for (int64_t l = 0; l < n_layer_; ++l) {
    const KvLayer kv = layer(l);
    auto* k = static_cast<uint8_t*>(kv.k);
    auto* v = static_cast<uint8_t*>(kv.v);
    backend_.copy(k + static_cast<uint64_t>(to) * kb, k + static_cast<uint64_t>(from) * kb,
                  static_cast<uint64_t>(n) * kb);
    backend_.copy(v + static_cast<uint64_t>(to) * vb, v + static_cast<uint64_t>(from) * vb,
                  static_cast<uint64_t>(n) * vb);
  }
}

KvLayer KvCache::layer(int64_t l) const {
  const uint64_t at = static_cast<uint64_t>(l * n_ctx_ * kv_dim_);
  return KvLayer{k_.data + at * dtype_info(k_type_).block_bytes,
                 v_.data + at * dtype_info(v_type_).block_bytes, k_type_, v_type_, kv_dim_};
}

}  // namespace strata
