#include "offline/bundle.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/content_hash.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "tensor/quantize.h"
#include "tiers/bundle_layout.h"

namespace strata {

BundleReport write_bundled_model(const Model& model, const std::string& path,
                                 const std::function<void(uint64_t, uint64_t)>& progress) {
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  if (mw.bundled) fail("'{}' is already bundled", model.file->path());
  const bool gated = ffn_has_gate(c.ffn);
  // A bundle holds its three rows in one type: ffn_up's. Rows of another type (the Q6_K
  // ffn_down layers of a Q4_K_M mixture) are requantized to it, row by row.
  const DType type = mw.layers[0].ffn_up.type;
  BundleReport report{type, 0};
  for (const LayerWeights& l : mw.layers) {
    const DType down = l.ffn_down_t.data != nullptr ? l.ffn_down_t.type : l.ffn_down.type;
    if (l.ffn_up.type != type || down != type || (gated && l.ffn_gate.type != type))
      ++report.requantized_layers;
  }
  const BundleLayout layout = BundleLayout::make(type, c.n_embd, c.n_ff, gated);

  GgufWriter w(path, kBundleAlign);
  for (const auto& [key, value] : model.file->metadata())
    if (key != "general.alignment") w.set(key, value);
  w.set(kFfnActivationKey, GgufValue::str(ffn_activation_name(c.ffn)));
  w.set(kBundleBytesKey, GgufValue::u64(layout.bundle_bytes));
  w.set(kBundleTypeKey, GgufValue::u32(static_cast<uint32_t>(type)));
  w.set(kBundleTypeNameKey, GgufValue::str(dtype_name(type)));
  w.set(kBundleSourceHashKey,
        GgufValue::str(content_hash_hex(model.file->bytes(), model.file->file_size())));
  if (model.file->is_powerinfer() && model.file->find(kPredictorThresholdsKey) == nullptr) {
    std::vector<GgufValue> t;
    for (const LayerWeights& l : mw.layers) t.push_back(GgufValue::f32(l.predictor.threshold));
    w.set(kPredictorThresholdsKey, GgufValue::array(GgufType::F32, std::move(t)));
  }
  auto is_ffn = [&](const std::string& name) {
    for (const char* suffix :
         {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_down_t.weight"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          name.rfind("blk.", 0) == 0)
        return true;
    }
    return false;
  };
  std::vector<const GgufTensorInfo*> kept;
  uint64_t total = 0;
  for (const auto& t : model.file->tensors())
    if (!is_ffn(t.name)) {
      w.add_tensor(t.name, t.type, t.dims);
      kept.push_back(&t);
      total += t.n_bytes;
    }
  for (int64_t l = 0; l < c.n_layer; ++l)
    w.add_tensor(fmt::format("blk.{}.ffn_bundles", l), DType::I8,
                 {static_cast<int64_t>(layout.bundle_bytes), c.n_ff});
  total += layout.bundle_bytes * static_cast<uint64_t>(c.n_ff * c.n_layer);

  uint64_t written = 0;
  for (const GgufTensorInfo* t : kept) {
    w.write_tensor_data({t->data, t->n_bytes});
    written += t->n_bytes;
  }
  std::vector<uint8_t> chunk;
  std::vector<float> scratch(static_cast<size_t>(c.n_embd));
  // One row into a bundle: copied, or through floats when its type is not the bundle's.
  auto put_row = [&](const MatrixView& m, int64_t r, uint8_t* dst) {
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
    const MatrixView down =
        lw.ffn_down_t.data != nullptr ? lw.ffn_down_t : transpose_down(lw.ffn_down, storage);
    constexpr int64_t kChunkNeurons = 256;
    for (int64_t i0 = 0; i0 < c.n_ff; i0 += kChunkNeurons) {
      const int64_t n = std::min(kChunkNeurons, c.n_ff - i0);
      chunk.assign(static_cast<size_t>(n) * layout.bundle_bytes, 0);
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* b = chunk.data() + static_cast<size_t>(i) * layout.bundle_bytes;
        if (gated) put_row(lw.ffn_gate, i0 + i, b + layout.gate_offset());
        put_row(lw.ffn_up, i0 + i, b + layout.up_offset());
        put_row(down, i0 + i, b + layout.down_offset());
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
