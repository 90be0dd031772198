#include "model/tensor_scales.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

// The scale's values: `groups` finite numbers of a float type, [1] or [groups].
std::vector<float> read_scale(const GgufTensorInfo& t, int64_t groups) {
  const bool shape_ok = t.dims.size() == 1 && t.dims[0] == groups;
  if (!shape_ok || !is_float_type(t.type))
    fail("tensor '{}' has shape [{}] of {}, expected [{}] of a float type", t.name,
         fmt::join(t.dims, ", "), dtype_name(t.type), groups);
  std::vector<float> v(static_cast<size_t>(groups));
  dequantize_row(t.type, t.data, v.data(), groups);
  for (float x : v)
    if (!std::isfinite(x)) fail("tensor '{}' holds a non-finite scale", t.name);
  return v;
}

MatrixView scaled_copy(const MatrixView& m, const std::vector<float>& scale, OwnedMatrices& owned) {
  auto copy = std::make_shared<std::vector<float>>(static_cast<size_t>(m.rows * m.cols));
  const int64_t rows_per_group = m.rows / static_cast<int64_t>(scale.size());
  for (int64_t r = 0; r < m.rows; ++r) {
    float* row = copy->data() + r * m.cols;
    dequantize_row(m.type, m.row(r), row, m.cols);
    const float s = scale[static_cast<size_t>(r / rows_per_group)];
    for (int64_t i = 0; i < m.cols; ++i) row[i] *= s;
  }
  MatrixView out{DType::F32, reinterpret_cast<const uint8_t*>(copy->data()), m.cols, m.rows,
                 static_cast<uint64_t>(m.cols) * sizeof(float)};
  owned.push_back(std::move(copy));
  return out;
}

}  // namespace

MatrixView apply_tensor_scale(ScaleContext& ctx, const std::string& base, const MatrixView& m,
                              bool apply, int64_t groups, std::vector<float>* bias) {
  ctx.source.accept_unused(base + ".input_scale");
  const GgufTensorInfo* t = ctx.source.find_tensor(base + ".scale");
  if (t == nullptr) return m;
  const std::vector<float> scale = read_scale(*t, groups);
  bool unit = true;
  for (float s : scale) unit &= s == 1.0f;
  if (unit) return m;
  if (!apply) {
    const std::string note = fmt::format(
        "'{}.scale' is left unapplied, as llama.cpp's graph for this architecture leaves it", base);
    if (ctx.notes.size() < 8) ctx.notes.push_back(note);
    return m;
  }
  if (!is_float_type(m.type))
    fail(
        "'{}': tensor '{}.scale' scales a {} matrix; strata applies per-tensor scales to F32, "
        "F16 and BF16 matrices only",
        ctx.source.path(), base, dtype_name(m.type));
  if (m.layout != Layout::Rows || m.rows % groups != 0)
    fail("'{}': tensor '{}.scale' does not fit its matrix", ctx.source.path(), base);
  if (bias != nullptr)
    for (float& x : *bias) x *= scale[0];
  return scaled_copy(m, scale, ctx.owned);
}

}  // namespace strata
