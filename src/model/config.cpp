#include "model/config.h"

#include <cmath>

#include "core/error.h"
#include "format/gguf_writer.h"

namespace strata {

const char* ffn_activation_name(FfnActivation a) {
  switch (a) {
    case FfnActivation::SwiGLU:
      return "swiglu";
    case FfnActivation::ReGLU:
      return "reglu";
    case FfnActivation::DReLU:
      return "drelu";
    case FfnActivation::GeGLU:
      return "geglu";
    case FfnActivation::ReLU:
      return "relu";
    case FfnActivation::GELU:
      return "gelu";
    case FfnActivation::SwiGLUOai:
      return "swiglu_oai";
  }
  return "?";
}

std::optional<FfnActivation> ffn_activation_from_name(const std::string& name) {
  for (auto a : kFfnActivations)
    if (name == ffn_activation_name(a)) return a;
  return std::nullopt;
}

std::string ffn_activation_names() {
  std::string s;
  for (auto a : kFfnActivations) s += std::string(s.empty() ? "" : ", ") + ffn_activation_name(a);
  return s;
}

namespace {

// The loader's bounds on the float parameters, applied when a file is written too (convert once
// wrote rope_theta 1e-50 as an f32 0, and rms_norm_eps 5: files its own loader refuses).
void check_float_params(const std::string& where, const std::string& a, const std::string& eps_key,
                        double freq_base, double norm_eps) {
  if (!(freq_base > 0.0 && freq_base < 1e30))  // NaN and inf fail too
    fail("'{}': {}rope.freq_base is {}; expected a finite positive number", where, a, freq_base);
  if (!(norm_eps > 0.0 && norm_eps < 1.0))
    fail("'{}': {} is {}; expected a number in (0, 1)", where, eps_key, norm_eps);
}

void read_experts(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string count_key = a + "expert_count", used_key = a + "expert_used_count";
  c.n_expert = f.get_int(count_key, 0);
  c.n_expert_used = f.get_int(used_key, 0);
  if (c.n_expert == 0 && c.n_expert_used == 0 && c.arch->always_experts)
    fail("'{}': {} files are mixtures of experts, but {} is missing", f.path(), c.architecture,
         count_key);
  if (c.n_expert == 0 && c.n_expert_used == 0) return;
  if (c.arch->experts == nullptr)
    fail("'{}': {} has no mixture-of-experts layers in strata, but {} is {}", f.path(),
         c.architecture, count_key, c.n_expert);
  if (c.n_expert < 1 || c.n_expert > kMaxExperts)
    fail("'{}': {} is {}; expected 1 to {}", f.path(), count_key, c.n_expert, kMaxExperts);
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert)
    fail("'{}': {} is {}; expected 1 to {} ({})", f.path(), used_key, c.n_expert_used, c.n_expert,
         count_key);
  // An expert's neurons as llama.cpp's loaders size them: the Qwen mixtures read
  // expert_feed_forward_length, where 0 or absent means feed_forward_length / experts used; a
  // llama file's experts are feed_forward_length wide (llama.cpp's llama reads no expert key,
  // and its model saver writes it as 0).
  const int64_t dense_ff = c.n_ff;
  c.n_ff_dense = dense_ff;
  c.expert_weights_norm = c.arch->renormalize_experts;
  const std::string expert_ff_key = a + "expert_feed_forward_length";
  if (c.arch->always_experts) {
    const int64_t n = f.get_int(expert_ff_key, 0);
    if (n < 0 || n > (int64_t{1} << 24))
      fail("'{}': {} is {}; expected 0 (unset) to {}", f.path(), expert_ff_key, n,
           int64_t{1} << 24);
    c.n_ff = n > 0 ? n : dense_ff / c.n_expert_used;
    if (c.n_ff < 1)
      fail("'{}': {} is unset and {}feed_forward_length too small", f.path(), expert_ff_key, a);
  }
  // A shared expert where the architecture has one (qwen2moe): 0 or absent means
  // feed_forward_length, as in llama.cpp.
  const std::string shared_key = a + "expert_shared_feed_forward_length";
  if (c.arch->experts->shared_gate != nullptr) {
    const int64_t n = f.get_int(shared_key, 0);
    if (n < 0 || n > (int64_t{1} << 24))
      fail("'{}': {} is {}; expected 0 (unset) to {}", f.path(), shared_key, n, int64_t{1} << 24);
    c.n_ff_shared = n > 0 ? n : dense_ff;
  }
}

// <arch>.rope.scaling.* as llama.cpp reads them: the type (default "linear"), the factor (0 or
// absent: none; the older rope.scale_linear too), attn_factor and the original context.
RopeScaling read_rope_scaling(const GgufFile& f, const std::string& a, int64_t n_ctx_train) {
  RopeScaling r;
  const std::string type_key = a + "rope.scaling.type";
  const std::string type = f.get_string(type_key, "linear");
  if (type == "none")
    r.type = RopeScalingType::None;
  else if (type == "linear")
    r.type = RopeScalingType::Linear;
  else if (type == "yarn")
    r.type = RopeScalingType::Yarn;
  else if (type == "longrope")
    fail("'{}': {} is longrope (Phi-3's two factor tables), which strata does not support yet",
         f.path(), type_key);
  else
    fail("'{}': {} is '{}'; expected none, linear or yarn", f.path(), type_key, type.substr(0, 32));
  const std::string factor_key = a + "rope.scaling.factor";
  double factor = f.get_float(factor_key, 0.0);
  if (f.find(factor_key) == nullptr) factor = f.get_float(a + "rope.scale_linear", 0.0);
  if (!(factor >= 0.0 && factor < 1e6))
    fail("'{}': {} is {}; expected 0 (none) or a positive factor", f.path(), factor_key, factor);
  r.freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
  const std::string attn_key = a + "rope.scaling.attn_factor";
  const double attn = f.get_float(attn_key, 1.0);
  if (!(attn > 0.0 && attn < 1e3))
    fail("'{}': {} is {}; expected a positive number", f.path(), attn_key, attn);
  r.attn_factor = static_cast<float>(attn);
  const std::string orig_key = a + "rope.scaling.original_context_length";
  r.n_ctx_orig = f.get_int(orig_key, n_ctx_train);
  if (r.n_ctx_orig < 1 || r.n_ctx_orig > (int64_t{1} << 32))
    fail("'{}': {} is {}; expected 1 to 2^32", f.path(), orig_key, r.n_ctx_orig);
  return r;
}

}  // namespace

bool ModelConfig::swa_rope_differs() const {
  if (sliding_window <= 0) return false;
  const bool base = rope_freq_base_swa > 0.0f && rope_freq_base_swa != rope_freq_base;
  const bool scale = rope_freq_scale_swa > 0.0f && rope_freq_scale_swa != rope_scaling.freq_scale;
  return base || scale;
}

float ModelConfig::score_scale() const {
  return attention_scale > 0.0f ? attention_scale
                                : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.architecture = f.get_string("general.architecture", "");
  if (c.architecture.empty()) fail("'{}' lacks general.architecture", f.path());
  c.arch = find_architecture(c.architecture);
  if (c.arch == nullptr)
    fail("'{}' has architecture '{}'; strata supports: {}", f.path(), c.architecture.substr(0, 64),
         architecture_names());
  c.name = f.get_string("general.name", "");
  const std::string a = c.architecture + ".";
  auto positive = [&](const std::string& key, int64_t value) {
    if (value <= 0 || value > (int64_t{1} << 32))
      fail("'{}': metadata {} = {} is out of range", f.path(), key, value);
    return value;
  };
  c.n_embd = positive(a + "embedding_length", f.get_int(a + "embedding_length"));
  c.n_layer = positive(a + "block_count", f.get_int(a + "block_count"));
  c.n_ff = positive(a + "feed_forward_length", f.get_int(a + "feed_forward_length"));
  c.n_head = positive(a + "attention.head_count", f.get_int(a + "attention.head_count"));
  c.n_head_kv =
      positive(a + "attention.head_count_kv", f.get_int(a + "attention.head_count_kv", c.n_head));
  c.n_ctx_train = positive(a + "context_length", f.get_int(a + "context_length", 2048));
  if (c.n_embd % c.n_head != 0)
    fail("'{}': embedding length {} is not divisible by {} heads", f.path(), c.n_embd, c.n_head);
  c.head_dim = positive(a + "attention.key_length",
                        f.get_int(a + "attention.key_length", c.n_embd / c.n_head));
  if (c.n_head % c.n_head_kv != 0)
    fail("'{}': {} heads are not a multiple of {} key/value heads", f.path(), c.n_head,
         c.n_head_kv);
  c.n_rot = positive(a + "rope.dimension_count", f.get_int(a + "rope.dimension_count", c.head_dim));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    fail("'{}': rope.dimension_count {} does not fit head size {}", f.path(), c.n_rot, c.head_dim);
  // strata's attention has one head size for keys and values (llama.cpp's files write both).
  const int64_t value_length = f.get_int(a + "attention.value_length", c.head_dim);
  if (value_length != c.head_dim)
    fail(
        "'{}': {}attention.value_length {} differs from key_length {}; strata supports equal "
        "key and value head sizes",
        f.path(), a, value_length, c.head_dim);
  const double freq_base = f.get_float(a + "rope.freq_base", 10000.0);
  const std::string eps_key = a + c.arch->norm_eps_key;
  const double norm_eps = f.get_float(eps_key, 1e-5);
  check_float_params(f.path(), a, eps_key, freq_base, norm_eps);
  c.rope_freq_base = static_cast<float>(freq_base);
  c.norm_eps = static_cast<float>(norm_eps);
  c.n_vocab = f.get_int(a + "vocab_size", 0);
  c.rope_scaling = read_rope_scaling(f, a, c.n_ctx_train);
  c.sliding_window = f.get_int(kSlidingWindowKey, 0);
  if (c.sliding_window < 0 || c.sliding_window > (int64_t{1} << 32))
    fail("'{}': {} is {}; expected 0 (none) to 2^32", f.path(), kSlidingWindowKey,
         c.sliding_window);

  const std::string act = f.get_string(kFfnActivationKey, "");
  if (!act.empty()) {
    const auto parsed = ffn_activation_from_name(act);
    if (!parsed)
      fail("'{}': {} is '{}'; expected one of {}", f.path(), kFfnActivationKey, act.substr(0, 32),
           ffn_activation_names());
    c.ffn = *parsed;
  } else {
    c.ffn = f.is_powerinfer() ? c.arch->powerinfer_ffn : c.arch->ffn;
  }
  read_experts(f, a, c);
  if (c.arch->read_hparams != nullptr) c.arch->read_hparams(f, c);
  // The layer's wiring is the architecture's: a gated FFN needs the gate tensor it has.
  if (ffn_has_gate(c.ffn) && !c.arch->has(LayerMatrix::FfnGate) &&
      !c.arch->has(LayerMatrix::FfnGateUp))
    fail("'{}': {} is a gated FFN, but {} has no gate", f.path(), ffn_activation_name(c.ffn),
         c.architecture);
  return c;
}

void check_writable(const ModelConfig& c) {
  const Architecture* arch = find_architecture(c.architecture);
  if (arch == nullptr) fail("cannot write architecture '{}'", c.architecture);
  const std::string a = c.architecture + ".";
  // As stored: f32 (a double of 1e-50 is 0 there).
  check_float_params(c.name.empty() ? "the model being written" : c.name, a, a + arch->norm_eps_key,
                     static_cast<double>(c.rope_freq_base), static_cast<double>(c.norm_eps));
}

namespace {

// The rope.scaling keys where they differ from llama.cpp's defaults.
void write_rope_scaling(const ModelConfig& c, const std::string& a, GgufWriter& w) {
  const RopeScaling& r = c.rope_scaling;
  // YaRN's, and LongRoPE's choice of table (Phi-3: the context it was trained at first).
  if (r.type == RopeScalingType::Yarn || (r.n_ctx_orig > 0 && r.n_ctx_orig != c.n_ctx_train))
    w.set(a + "rope.scaling.original_context_length",
          GgufValue::u32(static_cast<uint32_t>(r.n_ctx_orig)));
  if (r.type == RopeScalingType::Linear && r.freq_scale == 1.0f && r.attn_factor == 1.0f) return;
  w.set(a + "rope.scaling.type", GgufValue::str(rope_scaling_name(r.type)));
  if (r.freq_scale != 1.0f) w.set(a + "rope.scaling.factor", GgufValue::f32(1.0f / r.freq_scale));
  if (r.attn_factor != 1.0f) w.set(a + "rope.scaling.attn_factor", GgufValue::f32(r.attn_factor));
}

}  // namespace

void write_config(const ModelConfig& c, GgufWriter& w) {
  check_writable(c);
  const std::string a = c.architecture + ".";
  const Architecture* arch = find_architecture(c.architecture);
  auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.set("general.architecture", GgufValue::str(c.architecture));
  w.set("general.name", GgufValue::str(c.name));
  w.set(a + "context_length", u32(c.n_ctx_train));
  w.set(a + "embedding_length", u32(c.n_embd));
  w.set(a + "block_count", u32(c.n_layer));
  w.set(a + "feed_forward_length", u32(c.moe() && c.n_ff_dense > 0 ? c.n_ff_dense : c.n_ff));
  w.set(a + "attention.head_count", u32(c.n_head));
  w.set(a + "attention.head_count_kv", u32(c.n_head_kv));
  w.set(a + "attention.key_length", u32(c.head_dim));
  w.set(a + "attention.value_length", u32(c.head_dim));
  w.set(a + "rope.dimension_count", u32(c.n_rot));
  w.set(a + "rope.freq_base", GgufValue::f32(c.rope_freq_base));
  w.set(a + arch->norm_eps_key, GgufValue::f32(c.norm_eps));
  w.set(a + "vocab_size", u32(c.n_vocab));
  w.set(kFfnActivationKey, GgufValue::str(ffn_activation_name(c.ffn)));
  // strata's own key: a window on every layer (families with their own keys write those).
  if (c.sliding_window > 0 && arch->write_hparams == nullptr)
    w.set(kSlidingWindowKey, u32(c.sliding_window));
  write_rope_scaling(c, a, w);
  if (c.moe()) {
    w.set(a + "expert_count", u32(c.n_expert));
    w.set(a + "expert_used_count", u32(c.n_expert_used));
    w.set(a + "expert_feed_forward_length", u32(c.n_ff));
    if (c.n_ff_shared > 0) w.set(a + "expert_shared_feed_forward_length", u32(c.n_ff_shared));
  }
  if (arch->write_hparams != nullptr) arch->write_hparams(c, w);
}

}  // namespace strata
