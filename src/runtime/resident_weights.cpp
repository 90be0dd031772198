#include "runtime/resident_weights.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

namespace {

// The layer as the mode reads it, still in the model's memory.
ResidentLayer host_layer(const LayerWeights& l, FfnMode mode) {
  ResidentLayer r;
  r.attn_norm = l.attn_norm.data();
  r.ffn_norm = l.ffn_norm.data();
  r.attn_q = l.attn_q;
  r.attn_k = l.attn_k;
  r.attn_v = l.attn_v;
  r.attn_output = l.attn_output;
  r.ffn_gate = l.ffn_gate;
  r.ffn_up = l.ffn_up;
  if (mode == FfnMode::Dense && l.ffn_down.data != nullptr)
    r.ffn_down = l.ffn_down;
  else
    r.ffn_down_t = l.ffn_down_t;
  if (mode == FfnMode::Predict) r.predictor = l.predictor;
  return r;
}

template <typename Each>
void each_matrix(ResidentLayer& r, Each&& each) {
  for (auto [m, name] : {std::pair{&r.attn_q, "attn_q"},
                         {&r.attn_k, "attn_k"},
                         {&r.attn_v, "attn_v"},
                         {&r.attn_output, "attn_output"},
                         {&r.ffn_gate, "ffn_gate"},
                         {&r.ffn_up, "ffn_up"},
                         {&r.ffn_down, "ffn_down"},
                         {&r.ffn_down_t, "ffn_down_t"},
                         {&r.predictor.fc1, "predictor fc1"},
                         {&r.predictor.fc2, "predictor fc2"}})
    if (m->data != nullptr) each(*m, name);
}

}  // namespace

uint64_t ResidentWeights::device_bytes(const Model& model, FfnMode mode, bool with_ffn) {
  const ModelWeights& w = model.weights;
  const uint64_t n_embd = static_cast<uint64_t>(model.config.n_embd);
  uint64_t total = (w.output.bytes() + n_embd * 4);
  for (const LayerWeights& l : w.layers) {
    ResidentLayer r = host_layer(l, mode);
    if (!with_ffn) r.ffn_gate = r.ffn_up = r.ffn_down = r.ffn_down_t = MatrixView{};
    each_matrix(r, [&](const MatrixView& m, const char*) { total += m.bytes(); });
    total += 2 * n_embd * 4;
  }
  return total;
}

ResidentWeights::ResidentWeights(const Model& model, Backend& backend, FfnMode mode, bool with_ffn,
                                 const std::vector<uint8_t>& host_layers, bool output_on_host)
    : backend_(backend) {
  const ModelWeights& w = model.weights;
  const bool host = backend.device() == Device::Host;
  try {
    for (size_t i = 0; i < w.layers.size(); ++i) {
      ResidentLayer r = host_layer(w.layers[i], mode);
      const bool on_cpu = i < host_layers.size() && host_layers[i] != 0;
      if (!host && !with_ffn && !on_cpu)
        r.ffn_gate = r.ffn_up = r.ffn_down = r.ffn_down_t = MatrixView{};
      if (!host && !on_cpu) {
        const std::string layer = fmt::format("layer {} ", i);
        each_matrix(r, [&](MatrixView& m, const char* name) { m = upload(m, layer + name); });
        r.attn_norm = upload(w.layers[i].attn_norm, layer + "attn_norm");
        r.ffn_norm = upload(w.layers[i].ffn_norm, layer + "ffn_norm");
      }
      layers_.push_back(r);
    }
    const bool output_here = host || output_on_host;  // the host's views: not read here
    output_ = output_here ? w.output : upload(w.output, "output");
    output_norm_ = output_here ? w.output_norm.data() : upload(w.output_norm, "output_norm");
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
