#include "model/input_thresholds.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace strata {

const char* matrix_input_name(MatrixInput which) {
  switch (which) {
    case MatrixInput::Attention:
      return "attn_qkv";
    case MatrixInput::AttentionOutput:
      return "attn_output";
    case MatrixInput::Ffn:
      return "ffn_gate_up";
    case MatrixInput::FfnHidden:
      return "ffn_down";
  }
  return "?";
}

int64_t matrix_input_width(MatrixInput which, const ModelConfig& c) {
  switch (which) {
    case MatrixInput::Attention:
    case MatrixInput::Ffn:
      return c.n_embd;
    case MatrixInput::AttentionOutput:
      return c.n_head * c.head_dim;
    case MatrixInput::FfnHidden:
      return c.n_ff;
  }
  return 0;
}

int64_t matrix_input_weights(MatrixInput which, const ModelConfig& c) {
  const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  switch (which) {
    case MatrixInput::Attention:
      return c.n_embd * (q_dim + 2 * kv_dim);
    case MatrixInput::AttentionOutput:
      return q_dim * c.n_embd;
    case MatrixInput::Ffn:
      return c.n_embd * c.n_ff * (ffn_has_gate(c.ffn) ? 2 : 1);
    case MatrixInput::FfnHidden:
      return c.n_ff * c.n_embd;
  }
  return 0;
}

const char* sparsity_mode_name(SparsityMode m) {
  switch (m) {
    case SparsityMode::Off:
      return "off";
    case SparsityMode::Teal:
      return "teal";
    case SparsityMode::Cats:
      return "cats";
  }
  return "?";
}

SparsityMode parse_sparsity_mode(const std::string& word) {
  for (SparsityMode m : {SparsityMode::Off, SparsityMode::Teal, SparsityMode::Cats})
    if (word == sparsity_mode_name(m)) return m;
  fail("unknown sparsity mode '{}' (expected teal, cats or off)", word);
}

size_t InputThresholds::level_index(float level) const {
  if (levels.empty()) fail("the model carries no sparsity thresholds (make them with strata sparsify)");
  std::string have;
  for (float l : levels) have += fmt::format("{}{:g}", have.empty() ? "" : ", ", l);
  if (level < 0) {
    if (levels.size() == 1) return 0;
    fail("the model carries thresholds for sparsity {}: choose one with --sparsity", have);
  }
  for (size_t i = 0; i < levels.size(); ++i)
    if (std::abs(levels[i] - level) < 1e-4f) return i;
  fail("the model carries no thresholds for sparsity {:g} (it has {})", level, have);
}

namespace {

std::vector<float> float_array(const GgufFile& f, const char* key, size_t expected) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) fail("'{}': {} is missing (its sparsity calibration is incomplete)", f.path(), key);
  if (v->type != GgufType::Array || v->items.size() != expected)
    fail("'{}': {} must be an array of {} numbers (its sparsity calibration does not match the "
         "model)",
         f.path(), key, expected);
  std::vector<float> out;
  out.reserve(expected);
  for (const GgufValue& item : v->items) {
    const double x = item.as_float(key);
    if (!std::isfinite(x) || x < 0) fail("'{}': {} holds {} (thresholds are finite, >= 0)", f.path(), key, x);
    out.push_back(static_cast<float>(x));
  }
  return out;
}

GgufValue f32_array(const std::vector<float>& values) {
  std::vector<GgufValue> items;
  items.reserve(values.size());
  for (float x : values) items.push_back(GgufValue::f32(x));
  return GgufValue::array(GgufType::F32, std::move(items));
}

}  // namespace

InputThresholds read_input_thresholds(const GgufFile& f, const ModelConfig& c) {
  InputThresholds t;
  const GgufValue* levels = f.find(kSparsityLevelsKey);
  if (levels == nullptr) {
    for (const char* key : {kSparsityTealKey, kSparsityCatsKey})
      if (f.find(key) != nullptr)
        fail("'{}': {} without {} (its sparsity calibration is incomplete)", f.path(), key,
             kSparsityLevelsKey);
    return t;
  }
  if (levels->type != GgufType::Array || levels->items.empty())
    fail("'{}': {} must be a non-empty array of numbers", f.path(), kSparsityLevelsKey);
  t.n_layer = c.n_layer;
  t.levels = float_array(f, kSparsityLevelsKey, levels->items.size());
  for (size_t i = 0; i < t.levels.size(); ++i)
    if (t.levels[i] >= 1.0f || (i > 0 && t.levels[i] <= t.levels[i - 1]))
      fail("'{}': {} must ascend within [0, 1)", f.path(), kSparsityLevelsKey);
  const size_t rows = t.levels.size() * static_cast<size_t>(c.n_layer);
  const std::vector<float> teal = float_array(f, kSparsityTealKey, rows * kMatrixInputs);
  t.teal.resize(rows);
  for (size_t r = 0; r < rows; ++r)
    for (int i = 0; i < kMatrixInputs; ++i) t.teal[r][static_cast<size_t>(i)] = teal[r * kMatrixInputs + static_cast<size_t>(i)];
  t.cats = float_array(f, kSparsityCatsKey, rows);
  if (f.find(kSparsityTealKeptKey) != nullptr) {
    const std::vector<float> kept = float_array(f, kSparsityTealKeptKey, rows * kMatrixInputs);
    for (float x : kept)
      if (x > 1.0f) fail("'{}': {} holds {} (shares are at most 1)", f.path(), kSparsityTealKeptKey, x);
    t.teal_kept.resize(rows);
    for (size_t r = 0; r < rows; ++r)
      for (int i = 0; i < kMatrixInputs; ++i)
        t.teal_kept[r][static_cast<size_t>(i)] = kept[r * kMatrixInputs + static_cast<size_t>(i)];
  }
  if (const GgufValue* tokens = f.find(kSparsityTokensKey))
    t.tokens = static_cast<uint64_t>(tokens->as_int(kSparsityTokensKey));
  return t;
}

std::vector<std::pair<std::string, GgufValue>> input_threshold_metadata(const InputThresholds& t) {
  auto flat = [](const std::vector<InputThresholdRow>& rows) {
    std::vector<float> out;
    for (const InputThresholdRow& row : rows) out.insert(out.end(), row.begin(), row.end());
    return out;
  };
  std::vector<std::pair<std::string, GgufValue>> keys = {
      {kSparsityLevelsKey, f32_array(t.levels)},
      {kSparsityTealKey, f32_array(flat(t.teal))},
      {kSparsityCatsKey, f32_array(t.cats)},
      {kSparsityTokensKey, GgufValue::u64(t.tokens)}};
  if (!t.teal_kept.empty()) keys.push_back({kSparsityTealKeptKey, f32_array(flat(t.teal_kept))});
  return keys;
}

}  // namespace strata
