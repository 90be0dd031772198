#include "offline/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "tensor/quantize.h"

namespace strata {

SynthSpec synth_preset(const std::string& name) {
  SynthSpec s;
  ModelConfig& c = s.shape;
  c.architecture = "llama";
  c.name = "strata-synthetic";
  if (name == "tiny") {
    c.n_embd = 64, c.n_ff = 192, c.n_layer = 2, c.n_head = 4, c.n_head_kv = 2;
    c.n_vocab = 256, c.n_ctx_train = 256;
    return s;
  }
  if (name == "1b") {
    c.n_embd = 2048, c.n_ff = 5632, c.n_layer = 22, c.n_head = 32, c.n_head_kv = 4;
    c.n_vocab = 32000, c.n_ctx_train = 2048;
  } else if (name == "7b") {
    c.n_embd = 4096, c.n_ff = 11008, c.n_layer = 32, c.n_head = 32, c.n_head_kv = 32;
    c.n_vocab = 32000, c.n_ctx_train = 4096;
  } else if (name == "13b") {
    c.n_embd = 5120, c.n_ff = 13824, c.n_layer = 40, c.n_head = 40, c.n_head_kv = 40;
    c.n_vocab = 32000, c.n_ctx_train = 4096;
  } else {
    fail("unknown preset '{}' (tiny, 1b, 7b, 13b)", name);
  }
  c.name = "strata-synthetic-" + name;
  return s;
}

namespace {

// xorshift64*: fast enough to fill billions of weights.
class Random {
 public:
  explicit Random(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  float uniform() {  // [-1, 1)
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return static_cast<float>((s_ * 0x2545f4914f6cdd1dull) >> 40) * 0x1.0p-23f - 1.0f;
  }

 private:
  uint64_t s_;
};

}  // namespace

void write_synthetic_model(const SynthSpec& s, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress) {
  ModelConfig c = s.shape;
  if (c.n_embd % c.n_head != 0 || c.n_head % c.n_head_kv != 0)
    fail("synthetic model: heads must divide the embedding and kv heads the heads");
  const int64_t head_dim = c.n_embd / c.n_head;
  c.head_dim = c.n_rot = head_dim;
  GgufWriter w(path);
  write_config(c, w);
  w.set("strata.synthetic", GgufValue::boolean(true));

  if (s.tokenizer_from.empty()) {
    w.set("tokenizer.ggml.model", GgufValue::str("none"));  // no vocabulary: token ids only
  } else {
    const auto tok = GgufFile::open(s.tokenizer_from);
    for (const auto& [key, value] : tok->metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
    const GgufValue& tokens = tok->get("tokenizer.ggml.tokens");
    if (static_cast<int64_t>(tokens.items.size()) != c.n_vocab)
      fail("'{}' has {} tokens but the model's vocabulary is {}", s.tokenizer_from,
           tokens.items.size(), c.n_vocab);
  }

  struct Planned {
    std::string name;
    DType type;
    int64_t cols, rows;  // rows == 0: a norm vector of `cols`
  };
  std::vector<Planned> plan;
  plan.push_back({"token_embd.weight", s.type, c.n_embd, c.n_vocab});
  plan.push_back({"output_norm.weight", DType::F32, c.n_embd, 0});
  if (!s.tied_output) plan.push_back({"output.weight", s.type, c.n_embd, c.n_vocab});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    plan.push_back({p + "attn_norm.weight", DType::F32, c.n_embd, 0});
    plan.push_back({p + "attn_q.weight", s.type, c.n_embd, c.n_head * head_dim});
    plan.push_back({p + "attn_k.weight", s.type, c.n_embd, c.n_head_kv * head_dim});
    plan.push_back({p + "attn_v.weight", s.type, c.n_embd, c.n_head_kv * head_dim});
    plan.push_back({p + "attn_output.weight", s.type, c.n_head * head_dim, c.n_embd});
    plan.push_back({p + "ffn_norm.weight", DType::F32, c.n_embd, 0});
    if (ffn_has_gate(c.ffn)) plan.push_back({p + "ffn_gate.weight", s.type, c.n_embd, c.n_ff});
    plan.push_back({p + "ffn_up.weight", s.type, c.n_embd, c.n_ff});
    plan.push_back({p + "ffn_down.weight", s.type, c.n_ff, c.n_embd});
  }
  uint64_t total = 0;
  for (const auto& t : plan) {
    if (t.rows == 0) {
      w.add_tensor(t.name, t.type, {t.cols});
      total += row_bytes(t.type, t.cols);
    } else {
      w.add_tensor(t.name, t.type, {t.cols, t.rows});
      total += row_bytes(t.type, t.cols) * static_cast<uint64_t>(t.rows);
    }
  }

  Random rng(s.seed);
  uint64_t written = 0;
  std::vector<float> row;
  std::vector<uint8_t> buf;
  for (const auto& t : plan) {
    row.resize(t.cols);
    if (t.rows == 0) {
      // Norm weights near 1, so activations keep their scale through the layers.
      for (auto& v : row) v = 1.0f + 0.1f * rng.uniform();
      buf.resize(row_bytes(DType::F32, t.cols));
      quantize_row(DType::F32, row.data(), buf.data(), t.cols);
      w.write_tensor_data(buf);
      written += buf.size();
    } else {
      // Uniform with variance 1/cols keeps each product's outputs near unit scale.
      const float a = std::sqrt(3.0f / static_cast<float>(t.cols));
      const uint64_t rb = row_bytes(t.type, t.cols);
      const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / static_cast<int64_t>(rb));
      for (int64_t r0 = 0; r0 < t.rows; r0 += chunk) {
        const int64_t n = std::min(chunk, t.rows - r0);
        buf.resize(rb * n);
        for (int64_t r = 0; r < n; ++r) {
          for (auto& v : row) v = a * rng.uniform();
          quantize_row(t.type, row.data(), buf.data() + r * rb, t.cols);
        }
        w.write_tensor_data(buf);
        written += buf.size();
      }
    }
    if (progress) progress(written, total);
  }
  w.finish();
}

}  // namespace strata
