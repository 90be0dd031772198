#include "offline/bundle.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "offline/bundle_writing.h"
#include "offline/quant_recipe.h"
#include "tensor/quantize.h"
#include "tiers/bundle_layout.h"

namespace strata {

namespace {

// Neuron i's row of one of the FFN's matrices: a dense layer's row i, or a mixture's expert
// i / n_ff's row i % n_ff (every expert's neurons in order: ModelConfig::ffn_neurons).
struct NeuronRows {
  const LayerWeights& l;
  int64_t n_ff;
  MatrixView LayerMatrices::*dense;
  MatrixView ExpertMatrices::*expert;
  std::pair<const MatrixView*, int64_t> operator()(int64_t i) const {
    if (l.experts.empty()) return {&(l.*dense), i};
    return {&(l.experts[static_cast<size_t>(i / n_ff)].*expert), i % n_ff};
  }
  DType type() const { return l.experts.empty() ? (l.*dense).type : (l.experts[0].*expert).type; }
};

// The layer's down projection as ffn_down_t rows, one per neuron (transposed here when the
// file has only ffn_down, or a mixture's experts' downs).
MatrixView down_t_rows(const LayerWeights& l, std::vector<uint8_t>& storage) {
  if (l.ffn_down_t.data != nullptr) return l.ffn_down_t;
  if (l.experts.empty()) return transpose_down(l.ffn_down, storage);
  std::vector<MatrixView> downs;
  for (const ExpertMatrices& x : l.experts) downs.push_back(x.down);
  return transpose_expert_downs(downs, storage);
}

}  // namespace

BundleReport write_bundled_model(const Model& model, const std::string& path,
                                 const std::function<void(uint64_t, uint64_t)>& progress) {
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  if (mw.bundled) fail("'{}' is already bundled", model.file->path());
  if (c.n_ff_shared > 0 || c.n_dense_lead > 0)
    fail(
        "'{}' has a shared expert or leading dense layers (Qwen2-MoE, GLM-4.5), which the flash "
        "tier's predict mode does not compute yet",
        model.file->path());
  const bool gated = ffn_has_gate(c.ffn);
  // A bundle holds its three rows in one type: ffn_up's. Rows of another type (the Q6_K
  // ffn_down layers of a Q4_K_M mixture) are requantized to it, row by row.
  // A mixture's bundles hold every expert's neurons (ModelConfig::ffn_neurons).
  const int64_t neurons = c.ffn_neurons();
  auto rows_of = [&](const LayerWeights& l, MatrixView LayerMatrices::*dense,
                     MatrixView ExpertMatrices::*expert) {
    return NeuronRows{l, c.n_ff, dense, expert};
  };
  const DType type = rows_of(mw.layers[0], &LayerMatrices::ffn_up, &ExpertMatrices::up).type();
  BundleReport report{type, 0};
  for (const LayerWeights& l : mw.layers) {
    const DType down = l.ffn_down_t.data != nullptr ? l.ffn_down_t.type
                       : l.experts.empty()          ? l.ffn_down.type
                                                    : l.experts[0].down.type;
    const DType up = rows_of(l, &LayerMatrices::ffn_up, &ExpertMatrices::up).type();
    const DType gate = rows_of(l, &LayerMatrices::ffn_gate, &ExpertMatrices::gate).type();
    if (up != type || down != type || (gated && gate != type)) ++report.requantized_layers;
  }
  const BundleLayout layout = BundleLayout::make(type, c.n_embd, neurons, gated);

  GgufWriter w(path, kBundleAlign);
  set_bundle_metadata(w, model, type);
  w.set(kBundleBytesKey, GgufValue::u64(layout.bundle_bytes));
  if (model.file->is_powerinfer() && model.file->find(kPredictorThresholdsKey) == nullptr) {
    std::vector<GgufValue> t;
    for (const LayerWeights& l : mw.layers) t.push_back(GgufValue::f32(l.predictor.threshold));
    w.set(kPredictorThresholdsKey, GgufValue::array(GgufType::F32, std::move(t)));
  }
  // The FFN's matrices move into the bundles (a mixture's experts, stacked or one per expert,
  // too); its router, the predictors and everything else are kept as they are.
  const KeptTensors kept = add_kept_tensors(w, model);
  uint64_t total = kept.bytes;
  for (int64_t l = 0; l < c.n_layer; ++l)
    w.add_tensor(fmt::format("blk.{}.ffn_bundles", l), DType::I8,
                 {static_cast<int64_t>(layout.bundle_bytes), neurons});
  total += layout.bundle_bytes * static_cast<uint64_t>(neurons * c.n_layer);

  uint64_t written = write_kept_tensors(w, kept);
  std::vector<uint8_t> chunk;
  std::vector<float> scratch(static_cast<size_t>(c.n_embd));
  // One row into a bundle: copied, or through floats when its type is not the bundle's.
  auto put_row = [&](std::pair<const MatrixView*, int64_t> at, uint8_t* dst) {
    const MatrixView& m = *at.first;
    const int64_t r = at.second;
    if (m.type == type) {
      std::memcpy(dst, m.row(r), layout.row_bytes);
      return;
    }
    dequantize_row(m.type, m.row(r), scratch.data(), c.n_embd);
    quantize_row(type, scratch.data(), dst, c.n_embd);
  };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = mw.layers[l];
    std::vector<uint8_t> storage;
    const MatrixView down = down_t_rows(lw, storage);
    const NeuronRows gate = rows_of(lw, &LayerMatrices::ffn_gate, &ExpertMatrices::gate);
    const NeuronRows up = rows_of(lw, &LayerMatrices::ffn_up, &ExpertMatrices::up);
    constexpr int64_t kChunkNeurons = 256;
    for (int64_t i0 = 0; i0 < neurons; i0 += kChunkNeurons) {
      const int64_t n = std::min(kChunkNeurons, neurons - i0);
      chunk.assign(static_cast<size_t>(n) * layout.bundle_bytes, 0);
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* b = chunk.data() + static_cast<size_t>(i) * layout.bundle_bytes;
        if (gated) put_row(gate(i0 + i), b + layout.gate_offset());
        put_row(up(i0 + i), b + layout.up_offset());
        put_row({&down, i0 + i}, b + layout.down_offset());
      }
      w.write_tensor_data(chunk);
      written += chunk.size();
    }
    if (progress) progress(written, total);
  }
  w.finish();
  return report;
}

}  // namespace strata
