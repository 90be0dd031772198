// Per-tensor weight scales (the ".scale" tensors FP8/NVFP4 conversions write beside a matrix, and
// llama.cpp's loader takes for every family): the matrix's products are multiplied by the scale,
// one value, or one per expert for stacked experts. strata folds a scale into an F32 copy of a
// float matrix at load (the kernels then see an ordinary matrix); a scale on a quantized matrix
// other than 1 is refused by name. Whether a family applies a scale at all is its
// Architecture::scales (llama.cpp's graph); one it leaves unapplied is read and left, as there,
// and said in the load notes. The ".input_scale" beside it is read and unused: no llama.cpp
// graph of these families reads it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/tensor_source.h"
#include "tensor/matrix.h"

namespace strata {

// Memory of matrices made at load (scaled copies); shared so copies of ModelWeights keep it.
using OwnedMatrices = std::vector<std::shared_ptr<const std::vector<float>>>;

struct ScaleContext {
  TensorSource& source;
  OwnedMatrices& owned;
  std::vector<std::string>& notes;  // one line per kind of scale left unapplied
};

// The matrix `m` (loaded as `base` + ".weight", e.g. "blk.0.attn_q") with its scale applied when
// `apply`: itself when the file has no scale or it is 1, else an F32 copy times the scale.
// `groups` > 1: m is that many stacked experts of equal rows, the scale one value per expert.
// `bias`: a bias llama.cpp adds before it scales (its FFN: (W x + b) s, where attention's
// projections are (W x) s + b), scaled with the matrix.
MatrixView apply_tensor_scale(ScaleContext& ctx, const std::string& base, const MatrixView& m,
                              bool apply, int64_t groups = 1, std::vector<float>* bias = nullptr);

}  // namespace strata
