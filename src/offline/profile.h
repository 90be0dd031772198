// The activation profile: how often each FFN neuron fired (non-zero after the activation) over
// a text, per layer, or, profiled in predict mode, how often the predictor selected it: what a
// run of that mode reads, which is what its placement plan must know (the predictor selects a
// few times more neurons than fire on a sparse model, and others). Stored as a GGUF sidecar
// ("strata-profile"), tied to the model by a hash of its bytes; the placement solver and
// hot-neuron pinning read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/ffn_mode.h"

namespace strata {

struct NeuronProfile {
  std::string model_hash;  // content_hash_hex of the model file
  std::string model_file;  // the profiled model's file name (empty in older profiles)
  std::string text;        // what was read (file name)
  uint64_t tokens = 0;
  std::vector<std::vector<uint32_t>> counts;  // [layer][n_ff]
  // [layer]: share of a token's active neurons that were also active in one of the previous
  // kReuseWindow tokens: what a flash cache that keeps recent neurons (windowing) can reuse.
  // Empty in profiles written before it was measured.
  std::vector<double> window_reuse;
  // The FFN mode profiled: "dense" (every neuron computed: the activations that fire; the same
  // counts as gate-first) or "predict" (the predictor's selections). Older files: "dense".
  std::string ffn_mode = "dense";
  // The first kSelectedTokens tokens' own neurons, bit-packed: [layer][token * row + i / 8],
  // bit i % 8, row = (n_ff + 7) / 8 (the placement plan replays the flash caches over them).
  // Empty in profiles written before they were recorded.
  std::vector<std::vector<uint8_t>> selections;
  uint64_t selected_tokens = 0;
};

constexpr int kReuseWindow = 5;  // LLM in a Flash's window
constexpr uint64_t kSelectedTokens = 128;

// The hot-neuron curve of one layer: neurons sorted by count, share of all activations covered
// by the hottest x% of them.
struct LayerProfileSummary {
  double sparsity = 0;  // share of (token, neuron) activations that were zero
  double neurons_for_50 = 0, neurons_for_80 = 0, neurons_for_95 = 0;  // shares of neurons
  std::vector<double> curve;  // 101 points: activations covered by the hottest 0%, 1%, ... 100%
};

std::string model_hash(const Model& model);

// A run over `tokens` (windows of n_ctx) in `mode`: dense counts the non-zero activations per
// neuron, predict the predictor's selections (the model needs predictors and ffn_down_t:
// Model::ensure_down_t).
NeuronProfile profile_model(const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                            int64_t max_tokens, ThreadPool& pool,
                            const std::function<void(int64_t, int64_t)>& progress = {},
                            FfnMode mode = FfnMode::Dense);

LayerProfileSummary summarize_layer(const std::vector<uint32_t>& counts, uint64_t tokens);

void write_profile(const NeuronProfile& p, const std::string& path);
// Fails clearly for a file that is not a profile, or (with expected_hash) one made from another
// model.
NeuronProfile read_profile(const std::string& path, const std::string& expected_hash = "");

// A self-contained HTML page (inline SVG) plotting each layer's hot-neuron curve.
std::string profile_report_html(const NeuronProfile& p, const std::string& model_name);

}  // namespace strata
