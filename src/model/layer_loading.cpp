#include "model/layer_loading.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "model/tensor_reading.h"

namespace strata {

// fc1 [n_embd, rank] and fc2 [rank, n_ff] in GGUF order (a mixture's fc2: a row for each
// expert's every neuron, ModelConfig::ffn_neurons); the rank may differ per layer.
LayerPredictor load_predictor(TensorSource& f, const std::string& prefix, const ModelConfig& c) {
  LayerPredictor p;
  const GgufTensorInfo* fc1 = f.find_tensor(prefix + "fc1.weight");
  const GgufTensorInfo* fc2 = f.find_tensor(prefix + "fc2.weight");
  if (fc1 == nullptr && fc2 == nullptr) return p;
  if (fc1 == nullptr || fc2 == nullptr)
    fail("'{}' has only one of {}fc1.weight and {}fc2.weight", f.path(), prefix, prefix);
  if (fc1->dims.size() != 2 || fc1->dims[0] != c.n_embd || fc1->dims[1] <= 0)
    fail("tensor '{}fc1.weight' has shape {}, expected [{}, rank]", prefix, dims_text(fc1->dims),
         c.n_embd);
  const int64_t rank = fc1->dims[1];
  p.fc1 = matrix(f, prefix + "fc1.weight", c.n_embd, rank);
  p.fc2 = matrix(f, prefix + "fc2.weight", rank, c.ffn_neurons());
  return p;
}

std::vector<float> predictor_thresholds(TensorSource& f, int64_t n_layer) {
  std::vector<float> t(static_cast<size_t>(n_layer),
                       static_cast<float>(f.get_float("powerinfer.sparse_threshold", 0.0)));
  if (const GgufValue* v = f.find(kPredictorThresholdsKey)) {
    if (v->type != GgufType::Array || static_cast<int64_t>(v->items.size()) != n_layer)
      fail("'{}': {} must be an array of {} numbers", f.path(), kPredictorThresholdsKey, n_layer);
    for (int64_t i = 0; i < n_layer; ++i) {
      const double x = v->items[static_cast<size_t>(i)].as_float(kPredictorThresholdsKey);
      if (!std::isfinite(x))
        fail("'{}': {} holds a non-finite value", f.path(), kPredictorThresholdsKey);
      t[static_cast<size_t>(i)] = static_cast<float>(x);
    }
  }
  return t;
}

namespace {

// The name of a role present in the file (the first of its names found), or null; a
// required role the file lacks fails naming its first name.
template <typename Names, typename Role>
const char* present_name(TensorSource& f, const Names& names, Role role, const std::string& p) {
  const char* first = nullptr;
  bool required = false;
  for (const auto& n : names) {
    if (n.role != role) continue;
    if (f.find_tensor(p + n.gguf) != nullptr) return n.gguf;
    if (first == nullptr) first = n.gguf;
    required |= n.presence == Presence::Required;
  }
  if (required) fail("'{}' lacks the tensor '{}{}'", f.path(), p, first);
  return nullptr;
}

}  // namespace

void load_layer_vectors(TensorSource& f, const Architecture& a, const std::string& p,
                        const ModelConfig& c, LayerWeights& l) {
  for (int v = 0; v < kLayerVectors; ++v) {
    const auto role = static_cast<LayerVector>(v);
    const char* name = present_name(f, a.vectors, role, p);
    if (name == nullptr) continue;
    const bool per_expert = role == LayerVector::ExpertGateBias ||
                            role == LayerVector::ExpertUpBias || role == LayerVector::ExpertDownBias;
    const int64_t n = layer_vector_length(role, c);
    l.vectors[static_cast<size_t>(v)] =
        per_expert ? rows_f32(f, p + name, n / c.n_expert, c.n_expert) : vector_f32(f, p + name, n);
  }
  // A second norm's bias without its weight is a damaged file.
  if (!l.vec(LayerVector::AttnNorm2Bias).empty() && l.vec(LayerVector::AttnNorm2).empty())
    fail("'{}' has {}attn_norm_2.bias without its weight", f.path(), p);
}

namespace {

// The fused q/k/v of a family whose files normally have three (llama.cpp's create_tensor_qkv).
bool fused_qkv(const TensorSource& f, const Architecture& a, const std::string& p) {
  return a.has(LayerMatrix::AttnQkv) || (a.fused_qkv_allowed && f.has(p + "attn_qkv.weight"));
}

// A fused q/k/v bias (attn_qkv.bias, beside a fused matrix) as the q, k and v biases.
void load_fused_qkv_bias(TensorSource& f, const std::string& p, const ModelConfig& c,
                         LayerWeights& l) {
  const std::string name = p + "attn_qkv.bias";
  if (!f.has(name)) return;
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  const std::vector<float> all = vector_f32(f, name, q_dim + 2 * kv_dim);
  const auto part = [&](int64_t begin, int64_t n) {
    return std::vector<float>(all.begin() + begin, all.begin() + begin + n);
  };
  for (LayerVector v : {LayerVector::AttnQBias, LayerVector::AttnKBias, LayerVector::AttnVBias})
    if (!l.vec(v).empty()) fail("'{}' has both {} and a separate q/k/v bias", f.path(), name);
  l.vectors[static_cast<size_t>(LayerVector::AttnQBias)] = part(0, q_dim);
  l.vectors[static_cast<size_t>(LayerVector::AttnKBias)] = part(q_dim, kv_dim);
  l.vectors[static_cast<size_t>(LayerVector::AttnVBias)] = part(q_dim + kv_dim, kv_dim);
}

// Whether the family's graph applies a role's per-tensor scale (ffn_down_t is PowerInfer's, never
// scaled).
bool scale_applies(const Architecture& a, LayerMatrix role) {
  switch (role) {
    case LayerMatrix::AttnQ:
    case LayerMatrix::AttnK:
    case LayerMatrix::AttnV:
    case LayerMatrix::AttnQkv:
    case LayerMatrix::AttnOutput:
      return a.scales.attention;
    default:
      return a.scales.ffn;
  }
}

}  // namespace

std::string base_name(const std::string& weight_name) {
  constexpr std::string_view suffix = ".weight";
  return weight_name.ends_with(suffix) ? weight_name.substr(0, weight_name.size() - suffix.size())
                                       : weight_name;
}

namespace {

// The bias llama.cpp's build_ffn adds before a matrix's scale: the FFN's own (null for others).
std::vector<float>* bias_before_scale(LayerWeights& l, LayerMatrix role) {
  const auto slot = [&](LayerVector v) { return &l.vectors[static_cast<size_t>(v)]; };
  switch (role) {
    case LayerMatrix::FfnGate:
      return slot(LayerVector::FfnGateBias);
    case LayerMatrix::FfnUp:
      return slot(LayerVector::FfnUpBias);
    case LayerMatrix::FfnDown:
      return slot(LayerVector::FfnDownBias);
    default:
      return nullptr;
  }
}

MatrixView layer_matrix(TensorSource& f, ScaleContext& sc, const Architecture& a,
                        const std::string& p, const ModelConfig& c, LayerWeights& l,
                        LayerMatrix role, const char* name_override = nullptr) {
  const char* name =
      name_override != nullptr ? name_override : present_name(f, a.matrices, role, p);
  if (name == nullptr) return {};
  const auto [cols, rows] = layer_matrix_shape(role, c);
  const MatrixView m = matrix(f, p + name, cols, rows);
  if (role == LayerMatrix::FfnDownT) return m;
  return apply_tensor_scale(sc, base_name(p + name), m, scale_applies(a, role), 1,
                            bias_before_scale(l, role));
}

}  // namespace

void load_attention(TensorSource& f, ScaleContext& sc, const Architecture& a, const std::string& p,
                    const ModelConfig& c, LayerWeights& l) {
  if (fused_qkv(f, a, p)) {
    const char* name = a.has(LayerMatrix::AttnQkv) ? nullptr : "attn_qkv.weight";
    const MatrixView qkv = layer_matrix(f, sc, a, p, c, l, LayerMatrix::AttnQkv, name);
    const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
    l.attn_q = row_view(qkv, 0, q_dim);
    l.attn_k = row_view(qkv, q_dim, kv_dim);
    l.attn_v = row_view(qkv, q_dim + kv_dim, kv_dim);
    if (a.fused_qkv_allowed) load_fused_qkv_bias(f, p, c, l);
  } else {
    l.attn_q = layer_matrix(f, sc, a, p, c, l, LayerMatrix::AttnQ);
    l.attn_k = layer_matrix(f, sc, a, p, c, l, LayerMatrix::AttnK);
    l.attn_v = layer_matrix(f, sc, a, p, c, l, LayerMatrix::AttnV);
  }
  l.attn_output = layer_matrix(f, sc, a, p, c, l, LayerMatrix::AttnOutput);
}

namespace {

// Each expert's [cols, rows] matrix: views into the stacked [cols, rows, n_expert] tensor, or
// the expert's own 2-D tensors of an older file.
void load_expert_matrix(TensorSource& f, ScaleContext& sc, const std::string& p,
                        const ModelConfig& c, bool stacked, const char* stacked_name,
                        const char* each_name, int64_t cols, int64_t rows,
                        MatrixView ExpertMatrices::*member, LayerWeights& l) {
  if (!stacked) {
    for (int64_t e = 0; e < c.n_expert; ++e)
      l.experts[static_cast<size_t>(e)].*member =
          matrix(f, p + fmt::format(fmt::runtime(each_name), e), cols, rows);
    return;
  }
  const std::string name = p + stacked_name;
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 3 || t.dims[0] != cols || t.dims[1] != rows || t.dims[2] != c.n_expert)
    fail("tensor '{}' has shape {}, expected [{}, {}, {}]", name, dims_text(t.dims), cols, rows,
         c.n_expert);
  const MatrixView all = apply_tensor_scale(
      sc, base_name(name),
      MatrixView{t.type, t.data, cols, rows * c.n_expert, row_bytes(t.type, cols)},
      c.arch->scales.experts, c.n_expert);
  for (int64_t e = 0; e < c.n_expert; ++e)
    l.experts[static_cast<size_t>(e)].*member = row_view(all, e * rows, rows);
}

// A dense FFN's tensor names (gate, up, down).
struct FfnNames {
  const char *gate, *up, *down;
};

// A dense FFN every token uses, weight 1 unless a shared gate weighs it: a shared expert, or a
// mixture's leading dense layer, held as the layer's shared expert.
void load_always_used_ffn(TensorSource& f, ScaleContext& sc, const Architecture& a,
                          const std::string& p, const ModelConfig& c, const FfnNames& names,
                          int64_t n_ff, LayerWeights& l) {
  // A dense FFN: its scales as the family's FFN's.
  const auto dense = [&](const char* name, int64_t cols, int64_t rows) {
    return apply_tensor_scale(sc, base_name(p + name), matrix(f, p + name, cols, rows),
                              a.scales.ffn);
  };
  if (ffn_has_gate(c.ffn)) l.shared.gate = dense(names.gate, c.n_embd, n_ff);
  l.shared.up = dense(names.up, c.n_embd, n_ff);
  l.shared.down = dense(names.down, n_ff, c.n_embd);
}

void load_experts(TensorSource& f, ScaleContext& sc, const Architecture& a, const std::string& p,
                  const ModelConfig& c, LayerWeights& l) {
  const ExpertNames& n = *a.experts;
  l.ffn_gate_inp = matrix(f, p + n.router, c.n_embd, c.n_expert);
  l.experts.resize(static_cast<size_t>(c.n_expert));
  const bool stacked = f.find_tensor(p + n.up) != nullptr;
  if (ffn_has_gate(c.ffn))
    load_expert_matrix(f, sc, p, c, stacked, n.gate, n.gate_each, c.n_embd, c.n_ff,
                       &ExpertMatrices::gate, l);
  load_expert_matrix(f, sc, p, c, stacked, n.up, n.up_each, c.n_embd, c.n_ff, &ExpertMatrices::up,
                     l);
  load_expert_matrix(f, sc, p, c, stacked, n.down, n.down_each, c.n_ff, c.n_embd,
                     &ExpertMatrices::down, l);
  if (n.selection_bias != nullptr)
    l.vectors[static_cast<size_t>(LayerVector::ExpertSelectionBias)] =
        vector_f32(f, p + n.selection_bias, c.n_expert);
  if (c.n_ff_shared == 0) return;
  // The shared expert's gate: n_embd values, 1-D as llama.cpp writes it (or [n_embd, 1]).
  if (n.shared_gate != nullptr) {
    const GgufTensorInfo* g = f.find_tensor(p + n.shared_gate);
    if (g != nullptr && g->dims.size() == 1 && g->dims[0] == c.n_embd)
      l.shared_gate = MatrixView{g->type, g->data, c.n_embd, 1, row_bytes(g->type, c.n_embd)};
    else
      l.shared_gate = matrix(f, p + n.shared_gate, c.n_embd, 1);
  }
  load_always_used_ffn(f, sc, a, p, c, {n.shared_ffn_gate, n.shared_ffn_up, n.shared_ffn_down},
                       c.n_ff_shared, l);
}

}  // namespace

void load_ffn(TensorSource& f, ScaleContext& sc, const Architecture& a, const std::string& p,
              int64_t layer, const ModelConfig& c, LayerWeights& l) {
  if (c.routed(layer)) {
    load_experts(f, sc, a, p, c, l);
    return;
  }
  if (c.moe()) {  // a leading dense layer: its FFN as the layer's one always-used expert
    load_always_used_ffn(f, sc, a, p, c,
                         {a.gguf_name(LayerMatrix::FfnGate), a.gguf_name(LayerMatrix::FfnUp),
                          a.gguf_name(LayerMatrix::FfnDown)},
                         c.n_ff_dense, l);
    return;
  }
  if (a.has(LayerMatrix::FfnGateUp)) {  // rows [gate; up], as ggml_swiglu reads a fused one
    const MatrixView both = layer_matrix(f, sc, a, p, c, l, LayerMatrix::FfnGateUp);
    l.ffn_gate = row_view(both, 0, c.n_ff);
    l.ffn_up = row_view(both, c.n_ff, c.n_ff);
  } else {
    if (ffn_has_gate(c.ffn)) l.ffn_gate = layer_matrix(f, sc, a, p, c, l, LayerMatrix::FfnGate);
    l.ffn_up = layer_matrix(f, sc, a, p, c, l, LayerMatrix::FfnUp);
  }
  // The down projection as ffn_down, ffn_down_t or both; at least one.
  l.ffn_down = layer_matrix(f, sc, a, p, c, l, LayerMatrix::FfnDown);
  l.ffn_down_t = layer_matrix(f, sc, a, p, c, l, LayerMatrix::FfnDownT);
  if (l.ffn_down.data == nullptr && l.ffn_down_t.data == nullptr)
    fail("'{}' lacks the tensor '{}{}'", f.path(), p, a.gguf_name(LayerMatrix::FfnDown));
}

}  // namespace strata
