#include "runtime/kv_cache.h"

#include <cctype>
#include <new>
#include <string>

#include "core/anonymous_memory.h"
#include "core/error.h"

namespace strata {

namespace {
// Bytes of every layer's rows of one type: a row is n_head_kv * head_dim elements (whole blocks
// of a block type).
uint64_t cache_bytes(const ModelConfig& c, int64_t n_ctx, int64_t layers, DType type) {
  return static_cast<uint64_t>((layers > 0 ? layers : c.n_layer) * n_ctx) *
         row_bytes(type, static_cast<uint64_t>(c.n_head_kv * c.head_dim));
}
// A type as -ctk spells it: q8_0, f16.
std::string flag_spelling(DType t) {
  std::string name = dtype_info(t).name;
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}
}  // namespace

uint64_t KvCache::bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
                        int64_t layers) {
  return cache_bytes(c, n_ctx, layers, k_type) + cache_bytes(c, n_ctx, layers, v_type);
}

void KvCache::check_types(const ModelConfig& c, DType k_type, DType v_type) {
  for (const auto& [type, flag] : {std::pair{k_type, "--cache-type-k"}, std::pair{v_type, "--cache-type-v"}}) {
    const DTypeInfo& info = dtype_info(type);
    if (type != DType::F32 && type != DType::F16 && type != DType::Q8_0 && type != DType::Q4_0)
      fail("{} {} is not a KV cache type (f32, f16, q8_0, q4_0)", flag, flag_spelling(type));
    // A head's elements are whole blocks, so each head starts at a block.
    if (c.head_dim % info.block_size != 0)
      fail("{} {} stores blocks of {} values; this model's heads have {} (use f16)", flag, flag_spelling(type),
           info.block_size, c.head_dim);
  }
}

KvCache::KvCache(Backend& backend, const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type,
                 int64_t layers)
    : backend_(backend),
      k_type_(k_type),
      v_type_(v_type),
      n_ctx_(n_ctx),
      kv_dim_(c.n_head_kv * c.head_dim),
      n_layer_(layers > 0 ? layers : c.n_layer) {
  check_types(c, k_type, v_type);
  const uint64_t need = bytes(c, n_ctx, k_type, v_type, n_layer_);
  if (backend.device() == Device::Host && need > AnonymousMemory::available())
    fail(
        "the KV cache for a context of {} tokens needs {:.2f} GB, more than the {:.2f} GB of "
        "memory available; lower -c (or --cache-type-k/-v f16)",
        n_ctx, static_cast<double>(need) / 1e9,
        static_cast<double>(AnonymousMemory::available()) / 1e9);
  try {
    k_ = backend.allocate(cache_bytes(c, n_ctx, n_layer_, k_type), "the KV cache's keys");
    v_ = backend.allocate(cache_bytes(c, n_ctx, n_layer_, v_type), "the KV cache's values");
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
  const uint64_t kb = row_bytes(k_type_, static_cast<uint64_t>(kv_dim_));
  const uint64_t vb = row_bytes(v_type_, static_cast<uint64_t>(kv_dim_));
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
  return KvLayer{k_.data + row_bytes(k_type_, at), v_.data + row_bytes(v_type_, at), k_type_, v_type_, kv_dim_};
}

}  // namespace strata
