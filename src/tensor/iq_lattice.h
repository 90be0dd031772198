// The lattice of an IQ grid (tensor/iq_grids.h) for strata's quantizers: every combination of
// the grid's levels in each of its places, as the grid's entry there or as the list of the
// entries nearest to it, so a group of targets finds its best entry by rounding each place and,
// off the grid, weighing a few neighbours.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/iq_grids.h"

namespace strata {

class Lattice {
 public:
  explicit Lattice(IqGrid g);
  int width() const { return width_; }
  float top() const { return level_[n_levels_ - 1]; }
  float value(int entry, int j) const { return iq_grid_value(grid_, entry, j); }
  // The entry minimizing sum w_j (v_j - value_j)^2 for targets v (in grid units).
  int nearest(const float* v, const float* w) const;

 private:
  int key_of_entry(int e) const;
  int nearest_level(float v) const;

  IqGrid grid_;
  int width_, n_levels_;
  float level_[8] = {};
  std::vector<int> entry_of_;
  std::vector<std::vector<uint16_t>> neighbours_;
};

// Each grid's lattice, built on first use (thread-safe).
const Lattice& iq_lattice(IqGrid g);

// The weight of each of a block's 256 values in its squared error: the importance (null: none)
// times sqrt(sigma^2 + x^2), sigma^2 twice the block's mean square; x^2 without an importance.
void iq_block_weights(const float* x, const float* importance, float* w);

}  // namespace strata
