#include "runtime/resident_weights.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

namespace {

// The layer as the mode reads it, still in the model's memory.
ResidentLayer host_layer(const LayerWeights& l, FfnMode mode) {
  ResidentLayer r;
  static_cast<LayerMatrices&>(r) = l;
  // One down projection: ffn_down for a dense product, ffn_down_t for the axpy.
  if (mode == FfnMode::Dense && l.ffn_down.data != nullptr)
    r.ffn_down_t = MatrixView{};
  else
    r.ffn_down = MatrixView{};
  for (size_t v = 0; v < r.vectors.size(); ++v)
    r.vectors[v] = l.vectors[v].empty() ? nullptr : l.vectors[v].data();
  if (mode == FfnMode::Predict) r.predictor = l.predictor;
  if (mode != FfnMode::Dense && !l.experts.empty()) {
    // A mixture in a sparse mode is one FFN of every expert's neurons (the router picks
    // experts, the mode their neurons): the stacked gate and up as one matrix each, and the
    // experts' ffn_down_t (Model::ensure_down_t); the per-expert views are not read.
    r.ffn_gate = expert_neuron_rows(l.experts, &ExpertMatrices::gate);
    r.ffn_up = expert_neuron_rows(l.experts, &ExpertMatrices::up);
    r.experts.clear();
  }
  return r;
}

// The FFN's rows (a split's device holds its own copies of its neurons'); a mixture's router
// stays, as the dense blocks do: the device routes, then computes its part of the chosen experts.
void drop_ffn(ResidentLayer& r) {
  for (const LayerMatrixSlot& m : kLayerMatrixSlots)
    if (m.block == LayerBlock::Ffn) r.*m.member = MatrixView{};
  r.experts.clear();
}

template <typename Each>
void each_matrix(ResidentLayer& r, Each&& each) {
  for (const LayerMatrixSlot& m : kLayerMatrixSlots)
    if ((r.*m.member).data != nullptr) each(r.*m.member, m.name);
  for_each_expert_matrix(r, [&](MatrixView& m, const std::string& name) { each(m, name.c_str()); });
  for (auto [m, name] :
       {std::pair{&r.predictor.fc1, "predictor fc1"}, {&r.predictor.fc2, "predictor fc2"}})
    if (m->data != nullptr) each(*m, name);
}

uint64_t vector_bytes(const LayerWeights& l) {
  uint64_t bytes = 0;
  for (const std::vector<float>& v : l.vectors) bytes += v.size() * sizeof(float);
  return bytes;
}

}  // namespace

// The copies of TEAL's columns a layer has (LayerColumns' views), by name.
template <typename Each>
void each_column_copy(LayerColumns& c, Each&& each) {
  for (auto [m, name] : {std::pair{&c.attn_q, "attn_q columns"},
                         {&c.attn_k, "attn_k columns"},
                         {&c.attn_v, "attn_v columns"},
                         {&c.attn_output, "attn_output columns"},
                         {&c.ffn_gate, "ffn_gate columns"},
                         {&c.ffn_up, "ffn_up columns"},
                         {&c.ffn_down, "ffn_down columns"},
                         {&c.attn_qkv, "attn_qkv columns"},
                         {&c.ffn_gate_up, "ffn_gate_up columns"}})
    if (m->data != nullptr) each(*m, name);
}

uint64_t ResidentWeights::device_bytes(const Model& model, FfnMode mode, bool with_ffn,
                                       bool with_columns) {
  const ModelWeights& w = model.weights;
  uint64_t total = w.output.bytes() +
                   (w.output_norm.size() + w.output_norm_bias.size() + w.output_bias.size()) * 4;
  for (const LayerWeights& l : w.layers) {
    ResidentLayer r = host_layer(l, mode);
    if (!with_ffn) drop_ffn(r);
    each_matrix(r, [&](const MatrixView& m, const char*) { total += m.bytes(); });
    total += vector_bytes(l);
    if (with_columns) total += Model::column_copies_bytes(l);
  }
  return total;
}

ResidentWeights::ResidentWeights(const Model& model, Backend& backend, FfnMode mode, bool with_ffn,
                                 const std::vector<uint8_t>& host_layers, bool output_on_host,
                                 const std::vector<std::vector<uint8_t>>& experts_held,
                                 bool with_columns)
    : backend_(backend) {
  const ModelWeights& w = model.weights;
  const bool host = backend.device() == Device::Host;
  try {
    for (size_t i = 0; i < w.layers.size(); ++i) {
      ResidentLayer r = host_layer(w.layers[i], mode);
      const bool on_cpu = i < host_layers.size() && host_layers[i] != 0;
      if (with_columns && i < model.columns.size()) r.columns = model.columns[i];
      if (!host && !with_ffn && !on_cpu) drop_ffn(r);
      if (!host && !on_cpu && i < experts_held.size())
        for (size_t e = 0; e < r.experts.size(); ++e)
          if (experts_held[i].at(e) == 0) r.experts[e] = ExpertMatrices{};  // the CPU's
      if (!host && !on_cpu) {
        const std::string layer = fmt::format("layer {} ", i);
        each_matrix(r, [&](MatrixView& m, const char* name) { m = upload(m, layer + name); });
        each_column_copy(r.columns,
                         [&](MatrixView& m, const char* name) { m = upload(m, layer + name); });
        for (int v = 0; v < kLayerVectors; ++v) {
          const std::vector<float>& values = w.layers[i].vectors[static_cast<size_t>(v)];
          const char* name = model.config.arch->gguf_name(static_cast<LayerVector>(v));
          if (!values.empty())
            r.vectors[static_cast<size_t>(v)] = upload(values, layer + (name ? name : "vector"));
        }
      }
      layers_.push_back(r);
    }
    const bool output_here = host || output_on_host;  // the host's views: not read here
    output_ = output_here ? w.output : upload(w.output, "output");
    output_norm_ = output_here ? w.output_norm.data() : upload(w.output_norm, "output_norm");
    if (!w.output_norm_bias.empty())
      output_norm_bias_ =
          output_here ? w.output_norm_bias.data() : upload(w.output_norm_bias, "output_norm.bias");
    if (!w.output_bias.empty())
      output_bias_ = output_here ? w.output_bias.data() : upload(w.output_bias, "output.bias");
  } catch (...) {
    release_all();  // what did fit
    throw;
  }
}

ResidentWeights::~ResidentWeights() {
  release_all();
}

void ResidentWeights::release_all() {
  for (const Buffer& b : buffers_) backend_.release(b);
  buffers_.clear();
}

MatrixView ResidentWeights::upload(const MatrixView& m, const std::string& name) {
  const Buffer b = backend_.allocate(m.bytes(), name);
  buffers_.push_back(b);
  backend_.upload(b.data, m.data, m.bytes());
  MatrixView d = m;
  d.data = b.data;
  d.device = b.device;
  return d;
}

const float* ResidentWeights::upload(const std::vector<float>& v, const std::string& name) {
  const uint64_t bytes = v.size() * sizeof(float);
  const Buffer b = backend_.allocate(bytes, name);
  buffers_.push_back(b);
  backend_.upload(b.data, v.data(), bytes);
  return reinterpret_cast<const float*>(b.data);
}

}  // namespace strata
