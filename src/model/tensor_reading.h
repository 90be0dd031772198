// One tensor of a model file read as the loaders need it: present, of a type strata computes
// with, of the expected shape; each failure one line naming the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tensor_source.h"
#include "tensor/matrix.h"

namespace strata {

std::string dims_text(const std::vector<int64_t>& dims);  // "[a, b]"
const GgufTensorInfo& require(TensorSource& f, const std::string& name);
MatrixView matrix(TensorSource& f, const std::string& name, int64_t cols, int64_t rows);
std::vector<float> vector_f32(TensorSource& f, const std::string& name, int64_t n);
// A 2-D tensor [row, rows] of values (a mixture's stacked expert biases) as one vector.
std::vector<float> rows_f32(TensorSource& f, const std::string& name, int64_t row, int64_t rows);

}  // namespace strata
