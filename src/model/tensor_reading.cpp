#include "model/tensor_reading.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "tensor/quantize.h"

namespace strata {

std::string dims_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

const GgufTensorInfo& require(TensorSource& f, const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) fail("'{}' lacks the tensor '{}'", f.path(), name);
  if (!dtype_info(t->type).computable)
    fail(
        "tensor '{}' has type {}, which strata cannot compute with yet (supported: F32, F16, "
        "BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
        name, dtype_name(t->type));
  return *t;
}

MatrixView matrix(TensorSource& f, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 2 || t.dims[0] != cols || t.dims[1] != rows)
    fail("tensor '{}' has shape {}, expected [{}, {}]", name, dims_text(t.dims), cols, rows);
  return MatrixView{t.type, t.data, cols, rows, row_bytes(t.type, cols)};
}

std::vector<float> vector_f32(TensorSource& f, const std::string& name, int64_t n) {
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 1 || t.dims[0] != n)
    fail("tensor '{}' has shape {}, expected [{}]", name, dims_text(t.dims), n);
  std::vector<float> v(n);
  dequantize_row(t.type, t.data, v.data(), n);
  return v;
}

std::vector<float> rows_f32(TensorSource& f, const std::string& name, int64_t row, int64_t rows) {
  const GgufTensorInfo& t = require(f, name);
  if (t.dims.size() != 2 || t.dims[0] != row || t.dims[1] != rows)
    fail("tensor '{}' has shape {}, expected [{}, {}]", name, dims_text(t.dims), row, rows);
  std::vector<float> v(static_cast<size_t>(row * rows));
  const uint64_t bytes = row_bytes(t.type, row);
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + r * bytes, v.data() + r * row, row);
  return v;
}

}  // namespace strata
