#include "model/arch/hparams.h"

#include "core/error.h"
#include "format/gguf_writer.h"

namespace strata {

float optional_float(const GgufFile& f, const std::string& key, float fallback, double lo,
                     double hi) {
  if (f.find(key) == nullptr) return fallback;
  const double v = f.get_float(key, fallback);
  if (!(v >= lo && v <= hi))  // NaN fails too
    fail("'{}': {} is {}; expected a number from {} to {}", f.path(), key, v, lo, hi);
  return static_cast<float>(v);
}

void read_swa_pattern(const GgufFile& f, const std::string& prefix, uint32_t period,
                      bool dense_first, ModelConfig& c) {
  const std::string key = prefix + "attention.sliding_window_pattern";
  const auto n_layer = static_cast<size_t>(c.n_layer);
  c.swa_layers.assign(n_layer, 0);
  if (const GgufValue* v = f.find(key); v != nullptr && v->type == GgufType::Array) {
    if (v->items.size() != n_layer)
      fail("'{}': {} has {} entries; expected one per layer ({})", f.path(), key, v->items.size(),
           n_layer);
    for (size_t l = 0; l < n_layer; ++l)
      c.swa_layers[l] = v->items[l].type == GgufType::Bool ? v->items[l].as_bool(key)
                                                           : v->items[l].as_int(key) != 0;
    return;
  }
  const int64_t n = f.get_int(key, period);
  if (n < 0 || n > c.n_layer + 1)
    fail("'{}': {} is {}; expected 0 to {}", f.path(), key, n, c.n_layer + 1);
  for (size_t l = 0; l < n_layer; ++l) {
    const auto i = static_cast<int64_t>(l);
    c.swa_layers[l] = n == 0 || (dense_first ? i % n != 0 : i % n < n - 1);
  }
}

void write_swa_pattern(const ModelConfig& c, const std::string& prefix, GgufWriter& w) {
  if (c.swa_layers.empty()) return;
  std::vector<GgufValue> flags;
  for (uint8_t s : c.swa_layers) flags.push_back(GgufValue::boolean(s != 0));
  w.set(prefix + "attention.sliding_window_pattern",
        GgufValue::array(GgufType::Bool, std::move(flags)));
}

}  // namespace strata
