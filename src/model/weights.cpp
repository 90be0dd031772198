#include "model/weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/layer_loading.h"
#include "model/tensor_reading.h"
#include "model/tensor_scales.h"
#include "model/tensor_source.h"
#include "tensor/quantize.h"

namespace strata {

uint64_t expert_bytes(const LayerMatrices& l) {
  uint64_t bytes = 0;
  for (const ExpertMatrices& x : l.experts) bytes += x.gate.bytes() + x.up.bytes() + x.down.bytes();
  return bytes;
}

uint64_t shared_expert_bytes(const LayerMatrices& l) {
  return l.shared_gate.bytes() + l.shared.gate.bytes() + l.shared.up.bytes() +
         l.shared.down.bytes();
}

MatrixView expert_neuron_rows(const std::vector<ExpertMatrices>& experts,
                              MatrixView ExpertMatrices::*member) {
  if (experts.empty()) return {};
  MatrixView all = experts[0].*member;
  for (size_t e = 1; e < experts.size(); ++e) {
    const MatrixView& m = experts[e].*member;
    if (m.data != all.data + e * all.bytes() || m.type != all.type || m.layout != all.layout ||
        m.rows != all.rows)
      return {};
  }
  // Interleaved rows come in groups of 16 within each expert: one view only if none straddles.
  if (all.layout != Layout::Rows && all.rows % 16 != 0) return {};
  all.rows *= static_cast<int64_t>(experts.size());
  return all;
}

std::pair<int64_t, int64_t> layer_matrix_shape(LayerMatrix role, const ModelConfig& c) {
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  switch (role) {
    case LayerMatrix::AttnQ:
      return {c.n_embd, q_dim};
    case LayerMatrix::AttnK:
    case LayerMatrix::AttnV:
      return {c.n_embd, kv_dim};
    case LayerMatrix::AttnQkv:
      return {c.n_embd, q_dim + 2 * kv_dim};
    case LayerMatrix::AttnOutput:
      return {q_dim, c.n_embd};
    case LayerMatrix::FfnGate:
    case LayerMatrix::FfnUp:
    case LayerMatrix::FfnDownT:
      return {c.n_embd, c.n_ff};
    case LayerMatrix::FfnDown:
      return {c.n_ff, c.n_embd};
    case LayerMatrix::FfnGateUp:
      return {c.n_embd, 2 * c.n_ff};
    case LayerMatrix::Count:
      break;
  }
  return {0, 0};
}

int64_t layer_vector_length(LayerVector role, const ModelConfig& c) {
  switch (role) {
    case LayerVector::AttnQBias:
      return c.n_head * c.head_dim;
    case LayerVector::AttnKBias:
    case LayerVector::AttnVBias:
      return c.n_head_kv * c.head_dim;
    case LayerVector::FfnUpBias:
    case LayerVector::FfnGateBias:
      return c.n_ff;
    case LayerVector::AttnQNorm:
    case LayerVector::AttnKNorm:
      return c.head_dim;
    case LayerVector::AttnSinks:
      return c.n_head;
    case LayerVector::RouterBias:
    case LayerVector::ExpertSelectionBias:
      return c.n_expert;
    case LayerVector::ExpertGateBias:
    case LayerVector::ExpertUpBias:
      return c.n_expert * c.n_ff;
    case LayerVector::ExpertDownBias:
      return c.n_expert * c.n_embd;
    default:
      return c.n_embd;  // norms, the output and down biases
  }
}

std::vector<ColumnBundleLayout> ModelWeights::column_layouts() const {
  std::vector<ColumnBundleLayout> out;
  for (const LayerWeights& l : layers) out.push_back(l.column_bundle);
  return out;
}

uint64_t ModelWeights::bytes_read_per_token() const {
  uint64_t total = output.bytes() + token_embd.row_bytes + position_embd.row_bytes;
  for (const auto& l : layers) {
    for (const LayerMatrixSlot& m : kLayerMatrixSlots)  // one down projection, not both
      if (m.role != LayerMatrix::FfnDownT || l.ffn_down.data == nullptr)
        total += (l.*m.member).bytes();
    if (bundled) total += bundle.payload_bytes() * static_cast<uint64_t>(bundle.n_ff);
    if (column_bundled) {
      const ColumnBundleLayout& cb = l.column_bundle;
      total += (cb.has_gate ? 2 : 1) * cb.n_embd * cb.column_bytes + cb.n_ff * cb.down_row_bytes +
               cb.plane_bytes();
    }
    total += shared_expert_bytes(l);  // a leading dense layer's FFN too
    if (l.experts.empty()) continue;
    total += l.ffn_gate_inp.bytes() +
             expert_bytes(l) / l.experts.size() * static_cast<uint64_t>(experts_used);
  }
  return total;
}

namespace {

// The type of a column-bundled file's columns: a float type or one with column groups, recorded
// twice (id and name) so an edited or damaged id is refused.
DType column_bundle_type(TensorSource& f) {
  const int64_t type_id = f.get_int(kBundleTypeKey);
  const auto info = dtype_info(static_cast<uint32_t>(type_id));
  if (!info || !(is_float_type(info->type) || has_column_groups(info->type)))
    fail("'{}': {} is not a type column bundles hold (F32, F16, BF16, Q8_0, Q4_0, Q2_K..Q6_K)",
         f.path(), kBundleTypeKey);
  const std::string type_name = f.get_string(kBundleTypeNameKey, "");
  if (type_name != info->name)
    fail("'{}': {} says {} but {} says '{}': the file was edited or damaged; bundle it again",
         f.path(), kBundleTypeKey, info->name, kBundleTypeNameKey, type_name.substr(0, 32));
  return info->type;
}

// The absolute offset of a layer's bundles, checked to be `count` bundles of `bytes`.
uint64_t bundle_tensor(TensorSource& f, const std::string& name, uint64_t bytes, int64_t count) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("'{}' lacks the tensor '{}'", f.path(), name);
  if (t->type != DType::I8 || t->dims.size() != 2 || t->dims[0] != static_cast<int64_t>(bytes) ||
      t->dims[1] != count)
    fail("tensor '{}' has shape {}, expected [{}, {}] of I8", name, dims_text(t->dims), bytes,
         count);
  return f.data_offset() + t->offset;
}

// Each layer's gate/up and down types in a column-bundled file: strata.bundle.column_types (two
// type ids a layer) where the file has it (quantized bundles), else the bundle type for all.
std::vector<std::pair<DType, DType>> column_bundle_types(TensorSource& f, const ModelConfig& c) {
  const DType type = column_bundle_type(f);
  std::vector<std::pair<DType, DType>> types(static_cast<size_t>(c.n_layer), {type, type});
  if (const GgufValue* v = f.find(kColumnBundleTypesKey)) {
    if (v->type != GgufType::Array || v->items.size() != 2 * types.size())
      fail("'{}': {} must hold two type ids per layer ({})", f.path(), kColumnBundleTypesKey,
           2 * types.size());
    for (size_t l = 0; l < types.size(); ++l) {
      const auto id = [&](size_t k) {
        const auto info =
            dtype_info(static_cast<uint32_t>(v->items[2 * l + k].as_int(kColumnBundleTypesKey)));
        if (!info) fail("'{}': {} names an unknown type", f.path(), kColumnBundleTypesKey);
        return info->type;
      };
      types[l] = {id(0), id(1)};
    }
    if (types[0].first != type)
      fail("'{}': {} and {} disagree on layer 0: the file was edited or damaged; bundle it again",
           f.path(), kColumnBundleTypesKey, kBundleTypeKey);
  }
  for (const auto& [gate_up, down] : types)
    if (!ColumnBundleLayout::holds(gate_up, down, c.n_embd, c.n_ff))
      fail("'{}': column bundles of {} gate/up and {} down cannot hold an FFN of {} x {}", f.path(),
           dtype_name(gate_up), dtype_name(down), c.n_embd, c.n_ff);
  return types;
}

// A quantized column bundle's scale plane (tiers/column_bundle_layout.h): `bytes` of I8, read
// in place.
const uint8_t* plane_tensor(TensorSource& f, const std::string& name, uint64_t bytes) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("'{}' lacks the tensor '{}'", f.path(), name);
  if (t->type != DType::I8 || t->dims.size() != 1 || t->dims[0] != static_cast<int64_t>(bytes))
    fail("tensor '{}' has shape {}, expected [{}] of I8", name, dims_text(t->dims), bytes);
  return t->data;
}

}  // namespace

namespace {

// LongRoPE's divisor tables: both or neither, finite and non-zero.
void load_rope_factor_pair(TensorSource& f, const ModelConfig& c, ModelWeights& w) {
  const bool long_table = f.has("rope_factors_long.weight");
  if (long_table != f.has("rope_factors_short.weight"))
    fail("'{}' has only one of rope_factors_long.weight and rope_factors_short.weight", f.path());
  if (!long_table) return;
  w.rope_factors_long = vector_f32(f, "rope_factors_long.weight", c.n_rot / 2);
  w.rope_factors_short = vector_f32(f, "rope_factors_short.weight", c.n_rot / 2);
  for (const auto* table : {&w.rope_factors_long, &w.rope_factors_short})
    for (float x : *table)
      if (!std::isfinite(x) || x == 0.0f)
        fail("'{}': rope_factors_*.weight holds {}; expected finite non-zero divisors", f.path(),
             x);
}

// The tensors outside the layers: the embedding (which sizes the vocabulary when the metadata
// does not), the output norm (and bias), learned positions, the output (or the tied embedding).
void load_outer_tensors(TensorSource& f, ModelConfig& c, ModelWeights& w) {
  const GgufTensorInfo& embd = require(f, "token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != c.n_embd)
    fail("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", dims_text(embd.dims),
         c.n_embd);
  if (c.n_vocab == 0) c.n_vocab = embd.dims[1];
  w.token_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vector_f32(f, "output_norm.weight", c.n_embd);
  if (c.arch->output_norm_bias) w.output_norm_bias = vector_f32(f, "output_norm.bias", c.n_embd);
  if (c.arch->positions == PositionKind::Learned) {
    const GgufTensorInfo& pos = require(f, "position_embd.weight");
    if (pos.dims.size() != 2 || pos.dims[0] != c.n_embd || pos.dims[1] <= c.arch->position_offset)
      fail("tensor 'position_embd.weight' has shape {}, expected [{}, positions + {}]",
           dims_text(pos.dims), c.n_embd, c.arch->position_offset);
    w.position_embd = matrix(f, "position_embd.weight", c.n_embd, pos.dims[1]);
  }
  if (!c.arch->head_is_embedding && f.find_tensor("output.weight") != nullptr) {
    w.output = matrix(f, "output.weight", c.n_embd, c.n_vocab);
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  if (c.arch->output_bias && f.has("output.bias"))
    w.output_bias = vector_f32(f, "output.bias", c.n_vocab);
  // One divisor per rotary frequency, for every layer (llama.cpp's rope_freqs; Llama 3.1).
  if (c.arch->rope_freqs && f.has("rope_freqs.weight")) {
    w.rope_freqs = vector_f32(f, "rope_freqs.weight", c.n_rot / 2);
    for (float x : w.rope_freqs)
      if (!std::isfinite(x) || x == 0.0f)
        fail("'{}': rope_freqs.weight holds {}; expected finite non-zero divisors", f.path(), x);
  }
  if (c.arch->rope_factor_pair) load_rope_factor_pair(f, c, w);
  for (const char* name : c.arch->unused_tensors) f.accept_unused(name);
}

// A neuron-bundled file (strata bundle): the bundles' type and size, checked against the shape.
void read_bundle_layout(TensorSource& f, const ModelConfig& c, ModelWeights& w) {
  const GgufValue* bytes = f.find(kBundleBytesKey);
  if (bytes == nullptr) return;
  const int64_t type_id = f.get_int(kBundleTypeKey);
  const auto info = dtype_info(static_cast<uint32_t>(type_id));
  if (!info || !info->computable)
    fail("'{}': {} is not a computable tensor type", f.path(), kBundleTypeKey);
  const std::string type_name = f.get_string(kBundleTypeNameKey, info->name);
  if (type_name != info->name)
    fail("'{}': {} says {} but {} says '{}': the file was edited or damaged; bundle it again",
         f.path(), kBundleTypeKey, info->name, kBundleTypeNameKey, type_name.substr(0, 32));
  w.bundled = true;
  // A mixture's bundles: every expert's neurons (ModelConfig::ffn_neurons).
  w.bundle = BundleLayout::make(info->type, c.n_embd, c.ffn_neurons(), ffn_has_gate(c.ffn));
  if (static_cast<uint64_t>(bytes->as_int(kBundleBytesKey)) != w.bundle.bundle_bytes)
    fail("'{}': {} is {}, expected {} for this shape and type", f.path(), kBundleBytesKey,
         bytes->as_int(kBundleBytesKey), w.bundle.bundle_bytes);
}

// A column-bundled file (strata bundle --columns): per layer its gate/up and down types; empty
// for other files.
std::vector<std::pair<DType, DType>> read_column_bundle_kind(TensorSource& f, const ModelConfig& c,
                                                             ModelWeights& w) {
  const GgufValue* kind = f.find(kColumnBundleKindKey);
  if (kind == nullptr) return {};
  if (w.bundled) fail("'{}' has both neuron and column bundles", f.path());
  if (kind->as_string(kColumnBundleKindKey) != kColumnBundleKind)
    fail("'{}': {} is not '{}'", f.path(), kColumnBundleKindKey, kColumnBundleKind);
  if (c.moe() || c.n_ff_shared > 0)
    fail("'{}': column bundles of a mixture of experts are not supported", f.path());
  w.column_bundled = true;
  return column_bundle_types(f, c);
}

// A column-bundled layer's FFN: its bundles' offsets and, for quantized types, scale planes.
void load_column_bundles(TensorSource& f, const ModelConfig& c, const std::string& p,
                         std::pair<DType, DType> types, LayerWeights& l) {
  l.column_bundle =
      ColumnBundleLayout::make(types.first, types.second, c.n_embd, c.n_ff, ffn_has_gate(c.ffn));
  const ColumnBundleLayout& cb = l.column_bundle;
  l.gate_up_columns_offset =
      bundle_tensor(f, p + "ffn_gate_up_columns", cb.gate_up_bytes, c.n_embd);
  l.down_columns_offset = bundle_tensor(f, p + "ffn_down_columns", cb.down_bytes, c.n_ff);
  if (cb.groups()) {
    l.gate_up_column_scales =
        plane_tensor(f, p + "ffn_gate_up_column_scales", cb.gate_up_plane_bytes);
    l.down_column_scales = plane_tensor(f, p + "ffn_down_column_scales", cb.down_plane_bytes);
  }
}

// A neuron-bundled layer's FFN: where its bundles start (a mixture's router stays in RAM).
void load_neuron_bundles(TensorSource& f, const ModelConfig& c, const BundleLayout& bundle,
                         const std::string& p, LayerWeights& l) {
  const std::string name = p + "ffn_bundles";
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("'{}' lacks the tensor '{}'", f.path(), name);
  if (t->type != DType::I8 || t->dims.size() != 2 ||
      t->dims[0] != static_cast<int64_t>(bundle.bundle_bytes) || t->dims[1] != c.ffn_neurons())
    fail("tensor '{}' has shape {}, expected [{}, {}] of I8", name, dims_text(t->dims),
         bundle.bundle_bytes, c.ffn_neurons());
  l.bundles_offset = f.data_offset() + t->offset;
  if (c.moe()) l.ffn_gate_inp = matrix(f, p + c.arch->experts->router, c.n_embd, c.n_expert);
}

}  // namespace

ModelWeights load_weights(const GgufFile& file, ModelConfig& c) {
  TensorSource f(file);
  // Every layer has at least 4 tensors (a norm, the fused or separate attention projections,
  // the FFN's bundles or matrices): a block count the tensor table cannot hold is refused before
  // anything is sized by it (fuzz_gguf: 3.5 billion layers allocated 14 GB before the first
  // missing tensor).
  constexpr int64_t kLeastPerLayer = 4;
  if (c.n_layer > static_cast<int64_t>(f.tensor_count()) / kLeastPerLayer)
    fail("'{}': block_count {} needs at least {} tensors, the file has {}", f.path(), c.n_layer,
         c.n_layer * kLeastPerLayer, f.tensor_count());
  ModelWeights w;
  ScaleContext scales{f, w.owned, w.notes};
  w.experts_used = c.n_expert_used;
  load_outer_tensors(f, c, w);
  const std::vector<float> thresholds = predictor_thresholds(f, c.n_layer);
  read_bundle_layout(f, c, w);
  const auto column_types = read_column_bundle_kind(f, c, w);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    LayerWeights l;
    load_layer_vectors(f, *c.arch, p, c, l);
    load_attention(f, scales, *c.arch, p, c, l);
    if (w.column_bundled)
      load_column_bundles(f, c, p, column_types[static_cast<size_t>(i)], l);
    else if (w.bundled)
      load_neuron_bundles(f, c, w.bundle, p, l);
    else
      load_ffn(f, scales, *c.arch, p, i, c, l);
    l.predictor = load_predictor(f, p, c);
    if (l.predictor.present()) l.predictor.threshold = thresholds[static_cast<size_t>(i)];
    w.layers.push_back(std::move(l));
  }
  auto all = [&](auto has) { return std::all_of(w.layers.begin(), w.layers.end(), has); };
  w.has_down_t =
      !w.bundled && all([](const LayerWeights& l) { return l.ffn_down_t.data != nullptr; });
  w.has_predictors = all([](const LayerWeights& l) { return l.predictor.present(); });
  if (!w.has_predictors && std::any_of(w.layers.begin(), w.layers.end(),
                                       [](const LayerWeights& l) { return l.predictor.present(); }))
    fail("'{}' has predictors (fc1/fc2) for some layers but not all", f.path());
  // Multi-token-prediction layers (GLM-4.5's nextn): no graph of strata's reads them.
  for (int64_t i = c.n_layer; i < c.n_layer + c.n_layer_nextn; ++i)
    f.accept_unused_prefix(fmt::format("blk.{}.", i));
  f.check_all_claimed(c.architecture);
  return w;
}

}  // namespace strata
