// Loading bad models: each problem gives one Error naming it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/model.h"
#include "runtime/session.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::temp_file;

// Copies a valid tiny model, letting `edit` change metadata and drop/reshape/retype tensors.
struct Edit {
  std::string set_key{}, set_value{};
  std::string drop_tensor{};
  std::string reshape_tensor{};
  std::string retype_tensor{};  // declared as Q5_0 (unsupported), bytes sized to match
  std::string u32_key{};        // set to u32_value
  uint32_t u32_value = 0;
  std::string f32_key{};  // set to f32_value
  float f32_value = 0;
  std::vector<std::string> drop_keys{};
  std::string extra_tensor{};  // an F32 tensor of extra_length values, added
  int64_t extra_length = 1;
  float extra_value = 1.0f;
};

std::string edited_model(const std::string& name, const Edit& e, const std::string& from = "") {
  const auto src = GgufFile::open(
      from.empty() ? strata::testing::tiny_model(DType::F32, FfnActivation::SwiGLU) : from);
  const std::string path = temp_file(name);
  GgufWriter w(path);
  for (const auto& [k, v] : src->metadata())
    if (std::find(e.drop_keys.begin(), e.drop_keys.end(), k) == e.drop_keys.end()) w.set(k, v);
  if (!e.set_key.empty()) w.set(e.set_key, GgufValue::str(e.set_value));
  if (!e.u32_key.empty()) w.set(e.u32_key, GgufValue::u32(e.u32_value));
  if (!e.f32_key.empty()) w.set(e.f32_key, GgufValue::f32(e.f32_value));
  std::vector<std::pair<const GgufTensorInfo*, std::vector<uint8_t>>> data;
  for (const auto& t : src->tensors()) {
    if (t.name == e.drop_tensor) continue;
    auto dims = t.dims;
    DType type = t.type;
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (t.name == e.reshape_tensor) std::swap(dims[0], dims[1]);
    if (t.name == e.retype_tensor) {
      type = DType::Q8_1;  // known by size (activations' type), not a weight type
      dims = {256, 1};
      bytes.assign(8 * 36, 0);
    }
    w.add_tensor(t.name, type, dims);
    data.emplace_back(&t, std::move(bytes));
  }
  std::vector<float> extra(static_cast<size_t>(e.extra_length), e.extra_value);
  if (!e.extra_tensor.empty()) w.add_tensor(e.extra_tensor, DType::F32, {e.extra_length});
  for (const auto& [t, bytes] : data) w.write_tensor_data(bytes);
  if (!e.extra_tensor.empty())
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(extra.data()), extra.size() * 4});
  w.finish();
  return path;
}

void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    Model::load(path, false);
    FAIL() << "no error, expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelErrors, UnknownArchitecture) {
  expect_load_error(edited_model("arch.gguf", {"general.architecture", "gpt-j"}),
                    "architecture 'gpt-j'");
}

// The architectures' own tensors and rules (model/arch/): each missing or inconsistent piece
// is named in one line.
TEST(ModelErrors, ArchitecturesNameWhatTheirFilesLack) {
  using strata::testing::tiny_arch_model;
  const std::string falcon = tiny_arch_model("falcon", 2), opt = tiny_arch_model("opt"),
                    qwen2 = tiny_arch_model("qwen2"), qwen3 = tiny_arch_model("qwen3");
  struct Dropped {
    const std::string* from;
    const char* tensor;
    const char* error;
  };
  for (const Dropped& d : {
           Dropped{&falcon, "blk.1.attn_qkv.weight", "lacks the tensor 'blk.1.attn_qkv.weight'"},
           Dropped{&falcon, "blk.0.attn_norm_2.weight", "attn_norm_2.bias without its weight"},
           Dropped{&opt, "position_embd.weight", "lacks the tensor 'position_embd.weight'"},
           Dropped{&opt, "blk.0.ffn_up.bias", "lacks the tensor 'blk.0.ffn_up.bias'"},
           Dropped{&opt, "blk.1.ffn_down.bias", "'blk.1.ffn_down.bias'"},
           Dropped{&qwen2, "blk.1.attn_k.weight", "lacks the tensor 'blk.1.attn_k.weight'"},
           Dropped{&qwen3, "blk.0.attn_q_norm.weight",
                   "lacks the tensor 'blk.0.attn_q_norm.weight'"},
       }) {
    Edit e;
    e.drop_tensor = d.tensor;
    expect_load_error(edited_model(std::string("dropped_") + d.tensor + ".gguf", e, *d.from),
                      d.error);
  }
  Edit gated;
  gated.set_key = kFfnActivationKey;
  gated.set_value = "reglu";
  expect_load_error(edited_model("falcon_gated.gguf", gated, falcon), "falcon has no gate");
  // OPT's positions are learned: a context past the table is refused, not read past its end.
  const auto m = Model::load(opt, false);
  ThreadPool pool(1);
  const int64_t learned = m->weights.position_embd.rows - 2;
  EXPECT_NO_THROW(Session(*m, learned, pool));
  try {
    Session s(*m, learned + 1, pool);
    FAIL() << "a context past the learned positions was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos) << e.what();
  }
}

// A mixture's router, experts and counts: each missing or inconsistent piece named in one line.
TEST(ModelErrors, MixturesNameWhatTheirFilesLack) {
  using strata::testing::tiny_moe_model;
  const std::string stacked = tiny_moe_model(DType::F32, true),
                    split = tiny_moe_model(DType::F32, false);
  Edit router;
  router.drop_tensor = "blk.0.ffn_gate_inp.weight";
  expect_load_error(edited_model("moe_router.gguf", router, stacked),
                    "lacks the tensor 'blk.0.ffn_gate_inp.weight'");
  Edit shape;
  shape.reshape_tensor = "blk.1.ffn_up_exps.weight";
  expect_load_error(edited_model("moe_shape.gguf", shape, stacked),
                    "'blk.1.ffn_up_exps.weight' has shape [192, 64, 4], expected [64, 192, 4]");
  Edit one;
  one.drop_tensor = "blk.0.ffn_down.3.weight";
  expect_load_error(edited_model("moe_one.gguf", one, split),
                    "lacks the tensor 'blk.0.ffn_down.3.weight'");
  Edit used;
  used.u32_key = "llama.expert_used_count";
  used.u32_value = 5;
  expect_load_error(edited_model("moe_used.gguf", used, stacked),
                    "llama.expert_used_count is 5; expected 1 to 4");
  Edit count;
  count.u32_key = "llama.expert_count";
  count.u32_value = 100000;
  expect_load_error(edited_model("moe_count.gguf", count, stacked),
                    "llama.expert_count is 100000; expected 1 to 512");
  // More experts than the file's tensors hold.
  count.u32_value = 6;
  expect_load_error(edited_model("moe_more.gguf", count, stacked),
                    "'blk.0.ffn_gate_inp.weight' has shape [64, 4], expected [64, 6]");
  // Qwen3-MoE files are mixtures: one without its expert counts is refused, not run dense.
  Edit dense;
  dense.drop_keys = {"qwen3moe.expert_count", "qwen3moe.expert_used_count"};
  expect_load_error(
      edited_model("qwen3moe_dense.gguf", dense, strata::testing::tiny_arch_model("qwen3moe")),
      "qwen3moe files are mixtures of experts, but qwen3moe.expert_count is missing");
  Edit expert_ff;
  expert_ff.u32_key = "qwen3moe.expert_feed_forward_length";
  expert_ff.u32_value = 100;
  expect_load_error(
      edited_model("qwen3moe_ff.gguf", expert_ff, strata::testing::tiny_arch_model("qwen3moe")),
      "has shape [64, 192, 8], expected [64, 100, 8]");
  Edit falcon;
  falcon.u32_key = "falcon.expert_count";
  falcon.u32_value = 8;
  expect_load_error(
      edited_model("falcon_moe.gguf", falcon, strata::testing::tiny_arch_model("falcon")),
      "falcon has no mixture-of-experts layers");
}

TEST(ModelErrors, UnknownFfnVariant) {
  expect_load_error(edited_model("ffn.gguf", {kFfnActivationKey, "swishglu"}),
                    "is 'swishglu'; expected one of swiglu, reglu, drelu, geglu, relu, gelu");
}

TEST(ModelErrors, MissingTensor) {
  expect_load_error(edited_model("missing.gguf", {"", "", "blk.1.ffn_up.weight"}),
                    "lacks the tensor 'blk.1.ffn_up.weight'");
}

TEST(ModelErrors, ShapeMismatch) {
  expect_load_error(edited_model("shape.gguf", {"", "", "", "blk.0.attn_k.weight"}),
                    "blk.0.attn_k.weight' has shape");
}

TEST(ModelErrors, UnsupportedTensorType) {
  expect_load_error(edited_model("q8_1.gguf", {"", "", "", "", "blk.0.ffn_down.weight"}),
                    "has type Q8_1");
}

// Found by fuzz_gguf: a block count of 3.5 billion sized the per-layer tables before any layer's
// tensors were looked for (14 GB allocated, 31 s, then "lacks the tensor").
TEST(ModelErrors, BlockCountTheTensorTableCannotHold) {
  Edit e;
  e.u32_key = "llama.block_count";
  e.u32_value = 3556769793u;
  expect_load_error(edited_model("layers.gguf", e), "block_count 3556769793 needs");
}

// Issue 29: these were accepted, and a non-finite RoPE base or epsilon computes NaN logits.
TEST(ModelErrors, HyperParametersOutOfRange) {
  for (const float bad : {INFINITY, NAN, -1.0f, 0.0f}) {
    Edit e;
    e.f32_key = "llama.rope.freq_base";
    e.f32_value = bad;
    expect_load_error(edited_model("base.gguf", e), "rope.freq_base is");
    e.f32_key = "llama.attention.layer_norm_rms_epsilon";
    expect_load_error(edited_model("eps.gguf", e), "layer_norm_rms_epsilon is");
  }
  Edit v;
  v.u32_key = "llama.attention.value_length";
  v.u32_value = 3;
  expect_load_error(edited_model("vlen.gguf", v), "value_length 3 differs");
}

TEST(ModelErrors, MissingHyperParameter) {
  const auto src = GgufFile::open(strata::testing::tiny_model(DType::F32, FfnActivation::SwiGLU));
  const std::string path = temp_file("nokey.gguf");
  GgufWriter w(path);
  for (const auto& [k, v] : src->metadata())
    if (k != "llama.block_count") w.set(k, v);
  w.finish();
  expect_load_error(path, "llama.block_count");
}

// What llama.cpp's loader accepts for a family is read; a tensor no reader consumes is refused by
// its name, never run without (issue 53).
TEST(ModelErrors, ATensorNoReaderConsumesIsRefusedByName) {
  const std::string qwen2 = strata::testing::tiny_arch_model("qwen2");
  Edit stray;
  stray.extra_tensor = "blk.0.ffn_norm.bias";
  stray.extra_length = 64;
  expect_load_error(edited_model("stray.gguf", stray),
                    "has the tensor 'blk.0.ffn_norm.bias', which strata does not read for "
                    "architecture llama");
  // rope_freqs is Llama's: llama.cpp's qwen2 loader does not create it.
  Edit freqs;
  freqs.extra_tensor = "rope_freqs.weight";
  freqs.extra_length = 8;
  expect_load_error(edited_model("qwen2_freqs.gguf", freqs, qwen2),
                    "'rope_freqs.weight', which strata does not read for architecture qwen2");
}

TEST(ModelErrors, ScalesAndFrequencyFactorsAreCheckedWhereRead) {
  const auto base = Model::load(edited_model("plain.gguf", {}), false);
  const int64_t half = base->config.n_rot / 2;
  Edit zero;
  zero.extra_tensor = "rope_freqs.weight";
  zero.extra_length = half;
  zero.extra_value = 0.0f;
  expect_load_error(edited_model("freqs_zero.gguf", zero), "rope_freqs.weight holds 0");
  Edit short_freqs = zero;
  short_freqs.extra_length = half + 1;
  short_freqs.extra_value = 2.0f;
  expect_load_error(
      edited_model("freqs_short.gguf", short_freqs),
      fmt::format("tensor 'rope_freqs.weight' has shape [{}], expected [{}]", half + 1, half));
  Edit wide;
  wide.extra_tensor = "blk.0.attn_q.scale";
  wide.extra_length = 2;
  expect_load_error(edited_model("scale_wide.gguf", wide), "expected [1] of a float type");
  Edit quantized;
  quantized.extra_tensor = "blk.0.attn_q.scale";
  quantized.extra_value = 2.0f;
  expect_load_error(edited_model("scale_q8.gguf", quantized,
                                 strata::testing::tiny_model(DType::Q8_0, FfnActivation::SwiGLU)),
                    "'blk.0.attn_q.scale' scales a Q8_0 matrix");
  // Accepted: a scale of one on a quantized matrix changes nothing; an input scale is unused.
  quantized.extra_value = 1.0f;
  EXPECT_NO_THROW(
      Model::load(edited_model("scale_q8_unit.gguf", quantized,
                               strata::testing::tiny_model(DType::Q8_0, FfnActivation::SwiGLU)),
                  false));
  Edit input;
  input.extra_tensor = "blk.1.ffn_up.input_scale";
  input.extra_value = 7.0f;
  EXPECT_NO_THROW(Model::load(edited_model("input_scale.gguf", input), false));
}

}  // namespace
}  // namespace strata
