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

namespace {

int64_t bounded_int(const GgufFile& f, const std::string& key, int64_t fallback, int64_t hi) {
  const int64_t v = f.get_int(key, fallback);
  if (v < 0 || v > hi) fail("'{}': {} is {}; expected 0 to {}", f.path(), key, v, hi);
  return v;
}

}  // namespace

void read_mixture_rule(const GgufFile& f, const std::string& a, ExpertGating gating,
                       ModelConfig& c) {
  const std::string gating_key = a + "expert_gating_func";
  switch (bounded_int(f, gating_key, 0, 1 << 16)) {
    case 0:  // llama.cpp's "none": the family's own
      c.expert_gating = gating;
      break;
    case 1:
      c.expert_gating = ExpertGating::Softmax;
      break;
    case 2:
      c.expert_gating = ExpertGating::Sigmoid;
      break;
    default:
      fail("'{}': {} is {}; strata supports 1 (softmax) and 2 (sigmoid)", f.path(), gating_key,
           f.get_int(gating_key, 0));
  }
  const GgufValue* norm = f.find(a + "expert_weights_norm");
  c.expert_weights_norm = norm != nullptr && norm->as_bool(a + "expert_weights_norm");
  const float scale = optional_float(f, a + "expert_weights_scale", 0.0f, 0.0, 1e6);
  c.expert_weights_scale = scale == 0.0f ? 1.0f : scale;
  c.n_layer_nextn = bounded_int(f, a + "nextn_predict_layers", 0, c.n_layer - 1);
  c.n_layer -= c.n_layer_nextn;
  c.n_dense_lead = bounded_int(f, a + "leading_dense_block_count", 0, c.n_layer);
  const std::string shared_key = a + "expert_shared_count";
  if (f.find(shared_key) == nullptr) fail("'{}' lacks {}", f.path(), shared_key);
  const int64_t shared = bounded_int(f, shared_key, 0, 64);
  c.n_ff_shared = c.n_ff * shared;
}

void write_mixture_rule(const ModelConfig& c, const std::string& a, GgufWriter& w) {
  const auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.set(a + "expert_gating_func", u32(c.expert_gating == ExpertGating::Sigmoid ? 2 : 1));
  w.set(a + "expert_weights_norm", GgufValue::boolean(c.expert_weights_norm));
  w.set(a + "expert_weights_scale", GgufValue::f32(c.expert_weights_scale));
  w.set(a + "leading_dense_block_count", u32(c.n_dense_lead));
  w.set(a + "expert_shared_count", u32(c.n_ff > 0 ? c.n_ff_shared / c.n_ff : 0));
}

}  // namespace strata
