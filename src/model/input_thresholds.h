// Training-free activation sparsity's calibration, as a model file carries it (written by
// `strata sparsify`, offline/sparsify.h): for each model-wide sparsity level, a threshold per
// layer for each matrix input (TEAL) and per layer for the FFN's gate (CATS). Input values of
// magnitude at most the threshold are dropped (tensor/input_sparsity.h).
//
// The matrix inputs: q/k/v read one input (the attention's normed input) and share its
// threshold, and so do gate/up (the FFN's normed input): one mask per input, the columns each
// of its matrices reads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/config.h"

namespace strata {

enum class MatrixInput { Attention, AttentionOutput, Ffn, FfnHidden };
inline constexpr int kMatrixInputs = 4;
inline constexpr MatrixInput kAllMatrixInputs[] = {MatrixInput::Attention,
                                                   MatrixInput::AttentionOutput, MatrixInput::Ffn,
                                                   MatrixInput::FfnHidden};
// "attn_qkv", "attn_output", "ffn_gate_up", "ffn_down": the matrices that read it.
const char* matrix_input_name(MatrixInput which);
// The input's width (n_embd, q_dim, n_embd, n_ff) and the weights that read it per layer.
int64_t matrix_input_width(MatrixInput which, const ModelConfig& c);
int64_t matrix_input_weights(MatrixInput which, const ModelConfig& c);

// Which sparsity a run applies (--sparsity-mode).
enum class SparsityMode { Off, Teal, Cats };
// "off", "teal", "cats"; parse fails naming the word.
const char* sparsity_mode_name(SparsityMode m);
SparsityMode parse_sparsity_mode(const std::string& word);

using InputThresholdRow = std::array<float, kMatrixInputs>;

struct InputThresholds {
  // Model-wide sparsity levels, ascending, each in [0, 1); empty: the file has no calibration.
  std::vector<float> levels;
  std::vector<InputThresholdRow> teal;  // [level][layer]: each input's threshold
  std::vector<float> cats;              // [level][layer]: the gate's threshold
  // [level][layer]: each input's share of values kept on the calibration text (what a run can
  // expect to read of its columns); empty in files calibrated before it was written.
  std::vector<InputThresholdRow> teal_kept;
  uint64_t tokens = 0;                  // calibration tokens
  int64_t n_layer = 0;

  bool empty() const { return levels.empty(); }
  // The index of `level` (within 1e-4), or, with level < 0, the only level; fails with a
  // one-line message listing the levels the file has.
  size_t level_index(float level) const;
  const InputThresholdRow& teal_row(size_t level, int64_t layer) const {
    return teal[level * static_cast<size_t>(n_layer) + static_cast<size_t>(layer)];
  }
  float cats_value(size_t level, int64_t layer) const {
    return cats[level * static_cast<size_t>(n_layer) + static_cast<size_t>(layer)];
  }
};

// The metadata keys (f32 arrays: levels, teal [level][layer][input], cats [level][layer],
// teal_kept [level][layer][input] in [0, 1]; u64 tokens).
inline constexpr const char* kSparsityLevelsKey = "strata.sparsity.levels";
inline constexpr const char* kSparsityTealKey = "strata.sparsity.teal_thresholds";
inline constexpr const char* kSparsityCatsKey = "strata.sparsity.cats_thresholds";
inline constexpr const char* kSparsityTokensKey = "strata.sparsity.tokens";
inline constexpr const char* kSparsityTealKeptKey = "strata.sparsity.teal_kept";  // optional

// Reads and checks a file's calibration (empty when it has none): every array of the length
// the levels and the config's layers give, thresholds finite and non-negative, levels ascending
// in [0, 1). Anything else fails with a one-line message naming the key.
InputThresholds read_input_thresholds(const GgufFile& f, const ModelConfig& c);
// The keys' values for a writer.
std::vector<std::pair<std::string, GgufValue>> input_threshold_metadata(const InputThresholds& t);

}  // namespace strata
