// The weights a session computes with, in its backend's memory: on the CPU backend views of the
// model itself (nothing copied), on a device (a GPU, the reference device) copies of the
// matrices and norms the run's mode reads, each uploaded into its own allocation, so the
// device's budget counts them and an allocation that does not fit names the tensor. The
// embedding table stays on the host: a token's row is made f32 there and uploaded.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "model/model.h"
#include "runtime/ffn_mode.h"

namespace strata {

// The matrices the mode reads (others empty), the layer's vectors (null where it has none).
struct ResidentLayer : LayerMatrices {
  std::array<const float*, kLayerVectors> vectors{};
  const float* vec(LayerVector v) const { return vectors[static_cast<size_t>(v)]; }
  LayerPredictor predictor;  // predict mode
  // TEAL's column copies (Model::columns) where the session reads them: views of the model's on
  // the host, uploaded copies on a device (empty views: none).
  LayerColumns columns;
};

class ResidentWeights {
 public:
  // `with_ffn` false: a device gets no FFN matrices (a split FFN's store copies the hot rows).
  // `host_layers[l]` != 0: layer l computes on the CPU, so a device gets none of its matrices
  // (its entries stay views of the model). `experts_held` (a dense mixture split by expert; empty:
  // none): per layer, 1 for each expert the device holds; the others' entries are empty views.
  // `with_columns`: the model's column copies too (Model::ensure_input_columns).
  ResidentWeights(const Model& model, Backend& backend, FfnMode mode, bool with_ffn = true,
                  const std::vector<uint8_t>& host_layers = {}, bool output_on_host = false,
                  const std::vector<std::vector<uint8_t>>& experts_held = {},
                  bool with_columns = false);
  ~ResidentWeights();
  ResidentWeights(const ResidentWeights&) = delete;
  ResidentWeights& operator=(const ResidentWeights&) = delete;

  // Bytes a device copy of the model for `mode` holds (the placement inventory's figure); with
  // `with_columns`, TEAL's column copies (Model::column_copies_bytes).
  static uint64_t device_bytes(const Model& model, FfnMode mode, bool with_ffn = true,
                               bool with_columns = false);

  const ResidentLayer& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  const float* output_norm() const { return output_norm_; }
  const float* output_norm_bias() const { return output_norm_bias_; }  // null: none
  const float* output_bias() const { return output_bias_; }            // null: none
  const MatrixView& output() const { return output_; }

 private:
  MatrixView upload(const MatrixView& m, const std::string& name);
  const float* upload(const std::vector<float>& v, const std::string& name);
  void release_all();

  Backend& backend_;
  std::vector<ResidentLayer> layers_;
  const float* output_norm_ = nullptr;
  const float* output_norm_bias_ = nullptr;
  const float* output_bias_ = nullptr;
  MatrixView output_;
  std::vector<Buffer> buffers_;
};

}  // namespace strata
