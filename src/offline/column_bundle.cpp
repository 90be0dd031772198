#include "offline/column_bundle.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/column_group_copy.h"
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

// Float FFNs (any mixture of F32, F16, BF16) are bundled as columns of the up projection's
// type; quantized ones as rows of their column-group copies, which keep the file's values: per
// layer gate and up of one type with column groups, down of one too (it may differ: llama.cpp's
// _M mixtures), ffn_down in rows, shapes the copies fit. Returns each layer's layout.
std::vector<ColumnBundleLayout> column_layouts(const Model& model) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  const std::string& path = model.file->path();
  if (w.bundled || w.column_bundled) fail("'{}' is already bundled", path);
  if (c.moe() || c.n_ff_shared > 0)
    fail("'{}' is a mixture of experts: column bundles hold a dense FFN", path);
  const DType first = w.layers[0].ffn_up.type;
  const bool quantized = !column_products_pay(first);
  const bool gated = ffn_has_gate(c.ffn);
  std::vector<ColumnBundleLayout> layouts;
  for (const LayerWeights& l : w.layers) {
    const MatrixView& down = l.ffn_down.data != nullptr ? l.ffn_down : l.ffn_down_t;
    if (!quantized) {
      for (const MatrixView* m : {&l.ffn_gate, &l.ffn_up, &down})
        if (m->data != nullptr && !column_products_pay(m->type))
          fail("'{}' mixes {} and {} FFN weights: column bundles hold one kind (convert it to F16)",
               path, dtype_name(first), dtype_name(m->type));
      layouts.push_back(ColumnBundleLayout::make(first, c.n_embd, c.n_ff, gated));
      continue;
    }
    const DType type = l.ffn_up.type, down_type = down.type;
    if (gated && l.ffn_gate.type != type)
      fail("'{}' has {} gate and {} up weights in one layer: quantized column bundles stack them",
           path, dtype_name(l.ffn_gate.type), dtype_name(type));
    if (l.ffn_down.data == nullptr)
      fail("'{}' has ffn_down only as ffn_down_t: quantized column bundles need ffn_down's rows",
           path);
    for (DType t : {type, down_type})
      if (!has_column_groups(t))
        fail(
            "'{}' has {} FFN weights: column bundles hold F32, F16, BF16, Q8_0, Q4_0 or Q2_K..Q6_K "
            "(one kind in a model)",
            path, dtype_name(t));
    if (!ColumnBundleLayout::holds(type, down_type, c.n_embd, c.n_ff))
      fail(
          "'{}': column bundles of {} gate/up and {} down need n_ff ({}) and n_embd ({}) in whole "
          "chunks of the types' column groups (by 64 or 128 outputs, by 32 or 256 inputs); bundle "
          "it with neuron bundles",
          path, dtype_name(type), dtype_name(down_type), c.n_ff, c.n_embd);
    layouts.push_back(ColumnBundleLayout::make(type, down_type, c.n_embd, c.n_ff, gated));
  }
  return layouts;
}

// A quantized layer's bundles and planes: input j's row of the stacked gate/up copy and of
// down's copy, each in its own bundle (padded), the copies' scale planes apart.
struct GroupLayer {
  std::vector<uint8_t> gate_up, down, gate_up_plane, down_plane;
};

GroupLayer group_layer(const LayerWeights& lw, const ColumnBundleLayout& layout) {
  GroupLayer out;
  const auto split = [](std::span<const MatrixView> parts, int64_t count, uint64_t stride,
                        std::vector<uint8_t>& bundles, std::vector<uint8_t>& plane) {
    if (!column_groups_apply(parts)) fail("column bundles: the FFN's copies do not fit");
    std::vector<uint8_t> bytes(column_groups_copy_bytes(parts));
    const MatrixView copy = build_column_groups(parts, bytes.data());
    const uint64_t row = column_group_input_bytes(copy.type, copy.cols);
    bundles.assign(stride * static_cast<uint64_t>(count), 0);
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(bundles.data() + static_cast<uint64_t>(j) * stride,
                  column_group_input_row(copy, j), row);
    plane.assign(column_group_plane_bytes(copy.type, copy.rows, copy.cols), 0);
    write_scale_plane(copy, plane.data());
  };
  std::vector<MatrixView> gate_up;
  if (layout.has_gate) gate_up.push_back(lw.ffn_gate);
  gate_up.push_back(lw.ffn_up);
  split(gate_up, layout.n_embd, layout.gate_up_bytes, out.gate_up, out.gate_up_plane);
  split(std::span(&lw.ffn_down, 1), layout.n_ff, layout.down_bytes, out.down, out.down_plane);
  return out;
}

}  // namespace

std::vector<ColumnBundleLayout> write_column_bundled_model(
    const Model& model, const std::string& path,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  const std::vector<ColumnBundleLayout> layouts = column_layouts(model);
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  const bool gated = ffn_has_gate(c.ffn);
  const DType type = layouts[0].type;

  GgufWriter w(path, kBundleAlign);
  set_bundle_metadata(w, model, type);
  w.set(kColumnBundleKindKey, GgufValue::str(kColumnBundleKind));
  if (layouts[0].groups()) {
    std::vector<GgufValue> types;
    for (const ColumnBundleLayout& l : layouts) {
      types.push_back(GgufValue::u32(static_cast<uint32_t>(l.type)));
      types.push_back(GgufValue::u32(static_cast<uint32_t>(l.down_type)));
    }
    w.set(kColumnBundleTypesKey, GgufValue::array(GgufType::U32, std::move(types)));
  }
  const KeptTensors kept = add_kept_tensors(w, model);
  uint64_t total = kept.bytes;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const ColumnBundleLayout& layout = layouts[static_cast<size_t>(l)];
    w.add_tensor(fmt::format("blk.{}.ffn_gate_up_columns", l), DType::I8,
                 {static_cast<int64_t>(layout.gate_up_bytes), c.n_embd});
    w.add_tensor(fmt::format("blk.{}.ffn_down_columns", l), DType::I8,
                 {static_cast<int64_t>(layout.down_bytes), c.n_ff});
    total += layout.layer_bytes() + layout.plane_bytes();
    if (!layout.groups()) continue;
    w.add_tensor(fmt::format("blk.{}.ffn_gate_up_column_scales", l), DType::I8,
                 {static_cast<int64_t>(layout.gate_up_plane_bytes)});
    w.add_tensor(fmt::format("blk.{}.ffn_down_column_scales", l), DType::I8,
                 {static_cast<int64_t>(layout.down_plane_bytes)});
  }

  uint64_t written = write_kept_tensors(w, kept);
  std::vector<uint8_t> chunk;
  std::vector<float> scratch;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = mw.layers[l];
    const ColumnBundleLayout& layout = layouts[static_cast<size_t>(l)];
    if (layout.groups()) {
      const GroupLayer g = group_layer(lw, layout);
      for (const std::vector<uint8_t>* data :
           {&g.gate_up, &g.down, &g.gate_up_plane, &g.down_plane}) {
        w.write_tensor_data(*data);
        written += data->size();
      }
      if (progress) progress(written, total);
      continue;
    }
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
  return layouts;
}

}  // namespace strata
