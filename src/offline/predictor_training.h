// Trains the per-layer activation predictors (scores = fc2 . relu(fc1 . u), u the residual
// before ffn_norm) in C++ from (FFN input, active mask) pairs collected by a dense run over a
// text. Loss: binary cross-entropy with active neurons weighted up (recall matters more than
// precision: a missed neuron changes the output, an extra one only costs time). Each layer's
// threshold is then calibrated on a separate split so that `recall_target` of the truly active
// neurons are predicted, and recall/precision are measured on a third, held-out split. The rank
// is chosen per layer from a ladder: ranks are tried in increasing order, each trained briefly
// (search_epochs), and the one with the lowest total cost (predictor + predicted neurons' FFN
// rows) wins; the search stops once the cost rises; the winner is then trained for `epochs`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"

namespace strata {

struct PredictorTrainingOptions {
  std::vector<int64_t> rank_ladder = {16, 32, 64, 128, 256, 512};
  double recall_target = 0.99;
  int epochs = 8;
  int search_epochs = 3;  // epochs per rank while searching the ladder
  int batch = 256;
  float learning_rate = 2e-3f;
  float positive_weight = 4.0f;
  uint64_t seed = 1;
};

struct TrainedPredictor {
  int64_t rank = 0;
  std::vector<float> fc1;  // [rank][n_embd]
  std::vector<float> fc2;  // [n_ff][rank]
  float threshold = 0;
  // Held-out figures at the calibrated threshold.
  double recall = 0, precision = 0, predicted_density = 0, true_density = 0;
  double cost_share = 0;       // (predictor MACs + predicted FFN MACs) / dense FFN MACs
  double predictor_share = 0;  // predictor MACs / dense FFN MACs
};

// The training data of one layer: u rows (n_embd) and active masks (n_ff bytes, 0/1).
struct LayerSamples {
  std::vector<float> inputs;
  std::vector<uint8_t> active;
  int64_t count = 0;
};

// Dense run over the text collecting every layer's samples.
std::vector<LayerSamples> collect_predictor_samples(
    const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t max_tokens,
    ThreadPool& pool, const std::function<void(int64_t, int64_t)>& progress = {});

TrainedPredictor train_layer_predictor(const LayerSamples& samples, int64_t n_embd, int64_t n_ff,
                                       bool gated, const PredictorTrainingOptions& options,
                                       ThreadPool& pool,
                                       const std::function<void(const std::string&)>& log = {});

// Writes `model` with the predictors (as predictor_type), per-layer thresholds and ffn_down_t
// (replacing ffn_down unless keep_down) to `path`.
void write_model_with_predictors(const Model& model, const std::vector<TrainedPredictor>& p,
                                 DType predictor_type, bool keep_down, const std::string& path);

}  // namespace strata
