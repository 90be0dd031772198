#include "model/weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

std::string dims_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

const GgufTensorInfo& require(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("'{}' lacks the tensor '{}'", f.path(), name);
  if (!dtype_info(t->type).computable)
    fail(
        "tensor '{}' has type {}, which strata cannot compute with yet (supported: F32, F16, "
        "BF16, Q8_0, Q4_0)",
        name, dtype_name(t->type));
  return *t;
}

MatrixView matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 2 || t.dims[0] != cols || t.dims[1] != rows)
    fail("tensor '{}' has shape {}, expected [{}, {}]", name, dims_text(t.dims), cols, rows);
  return MatrixView{t.type, t.data, cols, rows, row_bytes(t.type, cols)};
}

std::vector<float> vector_f32(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 1 || t.dims[0] != n)
    fail("tensor '{}' has shape {}, expected [{}]", name, dims_text(t.dims), n);
  std::vector<float> v(n);
  dequantize_row(t.type, t.data, v.data(), n);
  return v;
}

}  // namespace

uint64_t ModelWeights::bytes_read_per_token() const {
  uint64_t total = output.bytes() + token_embd.row_bytes;
  for (const auto& l : layers) {
    total += l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes() + l.attn_output.bytes();
    total += l.ffn_gate.bytes() + l.ffn_up.bytes() + l.ffn_down.bytes();
  }
  return total;
}

ModelWeights load_weights(const GgufFile& f, ModelConfig& c) {
  ModelWeights w;
  const GgufTensorInfo& embd = require(f, "token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != c.n_embd)
    fail("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", dims_text(embd.dims),
         c.n_embd);
  if (c.n_vocab == 0) c.n_vocab = embd.dims[1];
  w.token_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vector_f32(f, "output_norm.weight", c.n_embd);
  if (f.find_tensor("output.weight") != nullptr) {
    w.output = matrix(f, "output.weight", c.n_embd, c.n_vocab);
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    LayerWeights l;
    l.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd);
    l.attn_q = matrix(f, p + "attn_q.weight", c.n_embd, q_dim);
    l.attn_k = matrix(f, p + "attn_k.weight", c.n_embd, kv_dim);
    l.attn_v = matrix(f, p + "attn_v.weight", c.n_embd, kv_dim);
    l.attn_output = matrix(f, p + "attn_output.weight", q_dim, c.n_embd);
    l.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.n_embd);
    if (ffn_has_gate(c.ffn)) l.ffn_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.ffn_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.ffn_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace strata
