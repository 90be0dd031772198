// A session's training-free activation sparsity (--sparsity-mode): which threshold applies at
// each point of a layer and what it kept. The one place that decides it; the layer block and
// the FFN executor call apply() at their points (runtime/layer_block.cpp, ffn_executor.cpp):
//   MatrixInput::Attention        ws.xn after the attention norm, before q/k/v read it (TEAL)
//   MatrixInput::AttentionOutput  the attention's output, before attn_output reads it (TEAL)
//   MatrixInput::Ffn              ws.xn after the FFN norm, before gate/up read it (TEAL)
//   MatrixInput::FfnHidden        the FFN's activations, before ffn_down reads them (TEAL)
//   kGatePoint                    the gate's values, before the activation (CATS)
// An observer (calibration, host backends) sees each point's values before any are dropped.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "backends/backend.h"
#include "model/model.h"

namespace strata {

// The matrix inputs' points (MatrixInput's values), then the FFN's gate (CATS).
inline constexpr int kGatePoint = kMatrixInputs;
inline constexpr int kSparsityPoints = kMatrixInputs + 1;

// Per layer since the session began: per point the values seen and those left non-zero.
// Training-free activation sparsity as asked (--sparsity-mode, --sparsity): the mode and the
// model-wide level whose thresholds apply (< 0: the file's only level). One value from the flags
// through planning to the session.
struct InputSparsityChoice {
  SparsityMode mode = SparsityMode::Off;
  float level = -1.0f;
};

struct InputDensity {
  std::array<uint64_t, kSparsityPoints> seen{}, kept{};
};

// Batches of at most this many tokens compute a thresholded input's products through the
// model's column-major copies, reading only the columns of the non-zero values (their union
// over the batch); larger batches (prompts: the union is nearly every column) multiply the
// row-major matrices, whose batched kernels are faster per column read. Measured (1B F16,
// TEAL 50%, 2 threads, `strata bench -p N -n 0 -r 7`, medians, columns against row-major in
// turn): 2 tokens 34.3 against 24.0 tok/s; 3 tokens 40.0/34.1 and 37.9/40.0 (even); 4 tokens
// 41.7 against 45.2 (the union of 4 tokens' halves is ~94% of the columns).
inline constexpr int64_t kColumnProductsMaxBatch = 2;
// Whether a batch of n tokens takes input-sparse products: TEAL, with the copies made
// (Model::ensure_input_columns) and in the memory of the backend that computes the layer.
bool use_input_columns(SparsityMode mode, bool columns_made, int64_t n);

// Called with a point's n rows of `width` values (host memory) before they are thresholded.
using InputObserver =
    std::function<void(int64_t layer, int point, int64_t n, int64_t width, const float* x)>;

class InputSparsifier {
 public:
  // `level`: the model-wide sparsity whose thresholds apply (< 0: the file's only level); fails
  // with a one-line message where the model cannot take `mode` (no calibration, no gate for
  // CATS, a mixture of experts).
  InputSparsifier(const Model& model, SparsityMode mode, float level);
  // The same checks alone (before a run prepares anything).
  static void check(const Model& model, SparsityMode mode, float level);
  // The mode with explicit thresholds for every layer (calibration's trials).
  void set_layer(int64_t layer, const InputThresholdRow& teal, float cats);
  void set_mode(SparsityMode mode) { mode_ = mode; }
  SparsityMode mode() const { return mode_; }
  void set_observer(InputObserver observer) { observer_ = std::move(observer); }

  // Thresholds point `point` of layer l over n rows of x (the backend's memory) where the
  // mode says so; kept values are added to counters[point] (the backend's memory). For the
  // gate, `act` is the FFN's activation.
  // With `mask` (else null): mask[i] = x[i] != 0 afterwards, whatever the threshold (0 included).
  void apply(Backend& be, int64_t layer, int point, float* x, int64_t n, uint64_t* counters,
             FfnActivation act = FfnActivation::SwiGLU, uint8_t* mask = nullptr);
  // Adds a pass's kept counts of layer l (downloaded from the counters).
  void add_kept(int64_t layer, const uint64_t* kept);
  const std::vector<InputDensity>& density() const { return density_; }

 private:
  float threshold(int64_t layer, int point) const;

  const ModelConfig& c_;
  SparsityMode mode_;
  std::vector<InputThresholdRow> teal_;  // per layer
  std::vector<float> cats_;              // per layer
  std::vector<InputDensity> density_;
  InputObserver observer_;
};

}  // namespace strata
