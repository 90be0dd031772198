#include "runtime/input_sparsifier.h"

#include "core/error.h"

namespace strata {

bool use_input_columns(SparsityMode mode, bool columns_made, int64_t n) {
  return mode == SparsityMode::Teal && columns_made && n <= kColumnProductsMaxBatch;
}

InputSparsifier::InputSparsifier(const Model& model, SparsityMode mode, float level)
    : c_(model.config), mode_(mode), density_(static_cast<size_t>(model.config.n_layer)) {
  const size_t layers = static_cast<size_t>(c_.n_layer);
  teal_.assign(layers, InputThresholdRow{});
  cats_.assign(layers, 0.0f);
  if (mode == SparsityMode::Off) return;
  check(model, mode, level);
  const InputThresholds& t = model.sparsity;
  const size_t at = t.level_index(level);
  for (size_t l = 0; l < layers; ++l) {
    teal_[l] = t.teal_row(at, static_cast<int64_t>(l));
    cats_[l] = t.cats_value(at, static_cast<int64_t>(l));
  }
}

void InputSparsifier::check(const Model& model, SparsityMode mode, float level) {
  if (mode == SparsityMode::Off) return;
  if (model.config.moe())
    fail("--sparsity-mode {}: mixtures of experts are not supported", sparsity_mode_name(mode));
  if (mode == SparsityMode::Cats && !ffn_has_gate(model.config.ffn))
    fail("--sparsity-mode cats thresholds the FFN's gate, and this model's FFN has none");
  model.sparsity.level_index(level);
}

void InputSparsifier::set_layer(int64_t layer, const InputThresholdRow& teal, float cats) {
  teal_.at(static_cast<size_t>(layer)) = teal;
  cats_.at(static_cast<size_t>(layer)) = cats;
}

float InputSparsifier::threshold(int64_t layer, int point) const {
  const auto l = static_cast<size_t>(layer);
  if (mode_ == SparsityMode::Teal && point < kMatrixInputs)
    return teal_[l][static_cast<size_t>(point)];
  if (mode_ == SparsityMode::Cats && point == kGatePoint) return cats_[l];
  return 0.0f;
}

void InputSparsifier::apply(Backend& be, int64_t layer, int point, float* x, int64_t n,
                            uint64_t* counters, FfnActivation act, uint8_t* mask) {
  const int64_t width =
      point == kGatePoint ? c_.n_ff : matrix_input_width(static_cast<MatrixInput>(point), c_);
  if (observer_) observer_(layer, point, n, width, x);
  const float t = threshold(layer, point);
  // A zero threshold keeps every value (|x| <= 0 only for zeros): nothing to do or count,
  // unless the mask is wanted.
  if (t <= 0.0f && mask == nullptr) return;
  density_[static_cast<size_t>(layer)].seen[static_cast<size_t>(point)] +=
      static_cast<uint64_t>(n * width);
  if (point == kGatePoint)
    be.sparsify_gate(act, x, n * width, t, counters + point);
  else
    be.sparsify(x, n * width, t, counters + point, mask);
}

void InputSparsifier::add_kept(int64_t layer, const uint64_t* kept) {
  InputDensity& d = density_[static_cast<size_t>(layer)];
  for (int p = 0; p < kSparsityPoints; ++p) d.kept[static_cast<size_t>(p)] += kept[p];
}

}  // namespace strata
