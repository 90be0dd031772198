#include "offline/column_bundle.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "offline/bundle_writing.h"
#include "offline/quant_recipe.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

// A row-major matrix as floats (rows x cols), for reading its columns.
std::vector<float> as_floats(const MatrixView& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) dequantize_row(m.type, m.row(r), &out[r * m.cols], m.cols);
  return out;
}

// Column j of a rows x cols float matrix into `type` at dst.
void put_column(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t j, DType type,
                std::vector<float>& scratch, uint8_t* dst) {
  scratch.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) scratch[static_cast<size_t>(r)] = m[r * cols + j];
  quantize_row(type, scratch.data(), dst, rows);
}

void check_columns_possible(const Model& model) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  const std::string& path = model.file->path();
  if (w.bundled || w.column_bundled) fail("'{}' is already bundled", path);
  if (c.moe() || c.n_ff_shared > 0)
    fail("'{}' is a mixture of experts: column bundles hold a dense FFN", path);
  for (const LayerWeights& l : w.layers) {
    const MatrixView& down = l.ffn_down.data != nullptr ? l.ffn_down : l.ffn_down_t;
    for (const MatrixView* m : {&l.ffn_gate, &l.ffn_up, &down})
      if (m->data != nullptr && !column_products_pay(m->type))
        fail(
            "'{}' has {} FFN weights: column bundles hold F32, F16 or BF16 columns (quantized "
            "column groups are for RAM, docs/INPUT_SPARSITY.md); bundle it with neuron bundles "
            "(strata bundle without --columns) or convert it to F16",
            path, dtype_name(m->type));
  }
}

}  // namespace

ColumnBundleLayout write_column_bundled_model(
    const Model& model, const std::string& path,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  check_columns_possible(model);
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  const bool gated = ffn_has_gate(c.ffn);
  const DType type = mw.layers[0].ffn_up.type;
  const ColumnBundleLayout layout = ColumnBundleLayout::make(type, c.n_embd, c.n_ff, gated);

  GgufWriter w(path, kBundleAlign);
  set_bundle_metadata(w, model, type);
  w.set(kColumnBundleKindKey, GgufValue::str(kColumnBundleKind));
  const KeptTensors kept = add_kept_tensors(w, model);
  uint64_t total = kept.bytes;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    w.add_tensor(fmt::format("blk.{}.ffn_gate_up_columns", l), DType::I8,
                 {static_cast<int64_t>(layout.gate_up_bytes), c.n_embd});
    w.add_tensor(fmt::format("blk.{}.ffn_down_columns", l), DType::I8,
                 {static_cast<int64_t>(layout.down_bytes), c.n_ff});
  }
  total += layout.layer_bytes() * static_cast<uint64_t>(c.n_layer);

  uint64_t written = write_kept_tensors(w, kept);
  std::vector<uint8_t> chunk;
  std::vector<float> scratch;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = mw.layers[l];
    // gate and up: n_ff rows of n_embd; input j's bundle is their column j.
    const std::vector<float> up = as_floats(lw.ffn_up);
    const std::vector<float> gate = gated ? as_floats(lw.ffn_gate) : std::vector<float>{};
    chunk.assign(layout.gate_up_layer_bytes(), 0);
    for (int64_t j = 0; j < c.n_embd; ++j) {
      uint8_t* b = chunk.data() + static_cast<uint64_t>(j) * layout.gate_up_bytes;
      if (gated) put_column(gate, c.n_ff, c.n_embd, j, type, scratch, b);
      put_column(up, c.n_ff, c.n_embd, j, type, scratch, b + (gated ? layout.column_bytes : 0));
    }
    w.write_tensor_data(chunk);
    written += chunk.size();
    // down: neuron i's bundle is its ffn_down_t row (column i of ffn_down, n_embd rows of n_ff).
    chunk.assign(layout.down_layer_bytes(), 0);
    if (lw.ffn_down.data != nullptr) {
      const std::vector<float> down = as_floats(lw.ffn_down);
      for (int64_t i = 0; i < c.n_ff; ++i)
        put_column(down, c.n_embd, c.n_ff, i, type,  scratch,
                   chunk.data() + static_cast<uint64_t>(i) * layout.down_bytes);
    } else {
      scratch.resize(static_cast<size_t>(c.n_embd));
      for (int64_t i = 0; i < c.n_ff; ++i) {
        dequantize_row(lw.ffn_down_t.type, lw.ffn_down_t.row(i), scratch.data(), c.n_embd);
        quantize_row(type, scratch.data(),
                     chunk.data() + static_cast<uint64_t>(i) * layout.down_bytes, c.n_embd);
      }
    }
    w.write_tensor_data(chunk);
    written += chunk.size();
    if (progress) progress(written, total);
  }
  w.finish();
  return layout;
}

}  // namespace strata
