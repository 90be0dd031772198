#include "tensor/iq_lattice.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace strata {

namespace {

constexpr int kNeighbours = 12;  // entries kept per off-grid lattice point

int grid_entries(IqGrid g) {
  switch (g) {
    case IqGrid::IQ2XS:
    case IqGrid::IQ3S:
      return 512;
    case IqGrid::IQ2S:
      return 1024;
    case IqGrid::IQ1S:
      return 2048;
    default:
      return 256;
  }
}

template <IqGrid G>
const Lattice& lattice_of() {
  static const Lattice l(G);
  return l;
}

}  // namespace

Lattice::Lattice(IqGrid g) : grid_(g), width_(iq_grid_width(g)), n_levels_(width_ == 4 ? 8 : 3) {
  for (int l = 0; l < n_levels_; ++l) level_[l] = iq_grid_level(g, l);
  int points = 1;
  for (int j = 0; j < width_; ++j) points *= n_levels_;
  entry_of_.assign(static_cast<size_t>(points), -1);
  const int n_entries = grid_entries(g);
  for (int e = 0; e < n_entries; ++e) entry_of_[static_cast<size_t>(key_of_entry(e))] = e;
  // Off-grid points: the entries nearest by unweighted distance (the weighted best is among
  // them for all but extreme weights).
  neighbours_.resize(static_cast<size_t>(points));
  std::vector<std::pair<float, int>> by_distance(static_cast<size_t>(n_entries));
  for (int p = 0; p < points; ++p) {
    if (entry_of_[static_cast<size_t>(p)] >= 0) continue;
    for (int e = 0; e < n_entries; ++e) {
      float d2 = 0;
      for (int j = 0, k = p; j < width_; ++j, k /= n_levels_) {
        const float diff = level_[k % n_levels_] - iq_grid_value(g, e, j);
        d2 += diff * diff;
      }
      by_distance[static_cast<size_t>(e)] = {d2, e};
    }
    std::partial_sort(by_distance.begin(), by_distance.begin() + kNeighbours, by_distance.end());
    for (int i = 0; i < kNeighbours; ++i)
      neighbours_[static_cast<size_t>(p)].push_back(
          static_cast<uint16_t>(by_distance[static_cast<size_t>(i)].second));
  }
}

int Lattice::nearest(const float* v, const float* w) const {
  int key = 0;
  for (int j = width_ - 1; j >= 0; --j) key = key * n_levels_ + nearest_level(v[j]);
  const int on_grid = entry_of_[static_cast<size_t>(key)];
  if (on_grid >= 0) return on_grid;  // each place at its nearest level: the weighted best
  int best = 0;
  float best_err = INFINITY;
  for (const uint16_t e : neighbours_[static_cast<size_t>(key)]) {
    float err = 0;
    for (int j = 0; j < width_; ++j) {
      const float diff = v[j] - value(e, j);
      err += w[j] * diff * diff;
    }
    if (err < best_err) best_err = err, best = e;
  }
  return best;
}

int Lattice::key_of_entry(int e) const {
  const int bits = width_ == 4 ? 3 : 2;
  const uint16_t code = iq_grid_code(grid_, e);
  int key = 0;
  for (int j = width_ - 1; j >= 0; --j)
    key = key * n_levels_ + ((code >> (bits * j)) & ((1 << bits) - 1));
  return key;
}

int Lattice::nearest_level(float v) const {
  int best = 0;
  for (int l = 1; l < n_levels_; ++l)
    if (std::fabs(v - level_[l]) < std::fabs(v - level_[best])) best = l;
  return best;
}

void iq_block_weights(const float* x, const float* importance, float* w) {
  float sum2 = 0;
  for (int i = 0; i < 256; ++i) sum2 += x[i] * x[i];
  const float sigma2 = 2.0f * sum2 / 256.0f;
  for (int i = 0; i < 256; ++i)
    w[i] = importance ? importance[i] * std::sqrt(sigma2 + x[i] * x[i]) : x[i] * x[i] + 1e-12f;
}

const Lattice& iq_lattice(IqGrid g) {
  switch (g) {
    case IqGrid::IQ2XXS:
      return lattice_of<IqGrid::IQ2XXS>();
    case IqGrid::IQ2XS:
      return lattice_of<IqGrid::IQ2XS>();
    case IqGrid::IQ2S:
      return lattice_of<IqGrid::IQ2S>();
    case IqGrid::IQ1S:
      return lattice_of<IqGrid::IQ1S>();
    case IqGrid::IQ3XXS:
      return lattice_of<IqGrid::IQ3XXS>();
    case IqGrid::IQ3S:
      return lattice_of<IqGrid::IQ3S>();
  }
  return lattice_of<IqGrid::IQ3S>();
}

}  // namespace strata
