// The random rows strata synth writes: a fast generator and the row fillers its tensor plan uses
// (offline/synth.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

namespace strata::synth_fill {

// xorshift64*: fast enough to fill billions of weights.
class Random {
 public:
  explicit Random(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  float uniform() {  // [-1, 1)
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return static_cast<float>((s_ * 0x2545f4914f6cdd1dull) >> 40) * 0x1.0p-23f - 1.0f;
  }

 private:
  uint64_t s_;
};

// A row filler per tensor: the default is uniform with variance 1/cols, which keeps each
// product's outputs near unit scale; norm weights are near 1.
using Fill = std::function<void(int64_t row, float* out)>;

// Biases: small (0.1 x uniform), as a bias near 1 would swamp the products.
inline Fill small_values(Random& rng, int64_t n) {
  return [&rng, n](int64_t, float* row) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.1f * rng.uniform();
  };
}

// Fills that draw from `rng` when written, as the writer's defaults do (norm weights near 1,
// matrix rows uniform with variance 1/cols).
inline Fill random_norm(Random& rng, int64_t n) {
  return [&rng, n](int64_t, float* row) {
    for (int64_t j = 0; j < n; ++j) row[j] = 1.0f + 0.1f * rng.uniform();
  };
}
inline Fill random_rows(Random& rng, int64_t cols) {
  return [&rng, cols](int64_t, float* row) {
    const float a = std::sqrt(3.0f / static_cast<float>(cols));
    for (int64_t j = 0; j < cols; ++j) row[j] = a * rng.uniform();
  };
}
inline Fill zeros(int64_t n) {
  return [n](int64_t, float* row) { std::fill(row, row + n, 0.0f); };
}

}  // namespace strata::synth_fill
