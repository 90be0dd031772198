// Calibration of training-free activation sparsity (`strata sparsify`): the thresholds of
// model/input_thresholds.h for each model-wide sparsity level, from the model reading a text.
//
// Block by block, as TEAL does: each layer is calibrated on its dense input (the dense model's
// residual stream over the calibration text) and judged by the error of its output,
// err = sum ||y - y_dense||^2 / sum ||y_dense - x||^2 (the share of the layer's own
// contribution that the dropped values change). Every layer reaches each level (weighted by the
// weights each input's matrices hold), so the model-wide sparsity of the layer matrices is the
// level. The split of a layer's level across its four inputs:
//   uniform: every input at the level;
//   greedy (TEAL's block-wise greedy): from all inputs dense, repeatedly raise the sparsity of
//     the input whose step costs the least error per weight skipped, in steps of `step`
//     (the last one shortened to land on the level); steps are judged lazily (a step's cost is
//     re-measured only when it is the cheapest on record, and taken when it still is).
// A threshold is the magnitude below which the wanted share of the input's calibration values
// lies. CATS: per layer, the magnitude of the gate's activation below which `level` of them lie.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"

namespace strata {

enum class SparsityAllocation { Uniform, Greedy };

struct SparsifyOptions {
  std::vector<float> levels{0.25f, 0.4f, 0.5f};  // model-wide targets, ascending, in (0, 1)
  int64_t n_ctx = 256;       // calibration window (each starts with BOS)
  int64_t max_tokens = 2048;  // calibration tokens read at most
  double step = 0.05;        // greedy: an input's sparsity per step
  SparsityAllocation allocation = SparsityAllocation::Greedy;
};

// One layer at one level.
struct LayerSparsity {
  std::array<double, 4> sparsity{};   // per MatrixInput: the share of its values dropped
  std::array<float, 4> threshold{};
  double error = 0;                    // TEAL's thresholds: the layer output's relative error
  float cats_threshold = 0;
  double cats_error = 0;               // CATS's
};

struct SparsifyResult {
  InputThresholds thresholds;
  std::vector<std::vector<LayerSparsity>> layers;  // [level][layer]
  int64_t tokens = 0;
  int64_t trials = 0;  // layer replays over the calibration text
};

// progress(layers done, n_layer).
SparsifyResult calibrate_sparsity(const Model& model, const std::vector<int32_t>& tokens,
                                  const SparsifyOptions& options, ThreadPool& pool,
                                  const std::function<void(int64_t, int64_t)>& progress = {});

// The model file again with the thresholds' keys (any earlier calibration replaced).
void write_model_with_thresholds(const Model& model, const InputThresholds& t,
                                 const std::string& path);

// A self-contained HTML page (inline SVG): per level, each layer's inputs' sparsity and errors.
std::string sparsity_report_html(const SparsifyResult& r, const std::string& model_name);

}  // namespace strata
