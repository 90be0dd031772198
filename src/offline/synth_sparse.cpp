#include "offline/synth_sparse.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace strata {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float uniform_from(uint64_t& s) {
  s = mix(s);
  return static_cast<float>(s >> 40) * 0x1.0p-23f - 1.0f;
}

// Inverse of the standard normal CDF by bisection (a few thousand calls per layer).
double normal_quantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 80; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

float SparseLayerGenerator::uniform() {
  return uniform_from(state_);
}

SparseLayerGenerator::SparseLayerGenerator(int64_t n_embd, int64_t n_ff, int64_t rank,
                                           double density, uint64_t seed)
    : n_embd_(n_embd), n_ff_(n_ff), rank_(rank), k_((rank - 1) / 2), state_(mix(seed)) {
  if (!(density > 0.0 && density < 1.0)) fail("--sparsity density must be in (0, 1)");
  if (rank < 3 || rank > n_embd) fail("--predictor-rank must be in [3, n_embd]");
  const float u = std::sqrt(3.0f);  // uniform [-u, u) has variance 1
  norm_.resize(n_embd);
  for (auto& v : norm_) v = 1.0f + 0.1f * uniform();
  norm_[0] = 1.0f;
  a_.resize(n_ff * k_);
  for (auto& v : a_) v = u * uniform() / std::sqrt(static_cast<float>(k_));
  b_.resize(k_ * n_embd);
  for (int64_t m = 0; m < k_; ++m)
    for (int64_t j = 0; j < n_embd; ++j)
      b_[m * n_embd + j] = j == 0 ? 0.0f : u * uniform() / std::sqrt(static_cast<float>(n_embd));
  noise_seed_ = mix(state_ + 17);
  down_seed_ = mix(state_ + 29);

  // Power-law firing probabilities p = min(0.98, C (r+1)^-0.7) over a random ranking, C chosen
  // by bisection so that the mean is `density`.
  std::vector<int64_t> order(n_ff);
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n_ff - 1; i > 0; --i) {
    state_ = mix(state_);
    std::swap(order[i], order[state_ % static_cast<uint64_t>(i + 1)]);
  }
  auto mean_for = [&](double c) {
    double sum = 0;
    for (int64_t r = 0; r < n_ff; ++r) sum += std::min(0.98, c * std::pow(r + 1.0, -0.7));
    return sum / n_ff;
  };
  double lo = 0, hi = 1e6;
  for (int i = 0; i < 100; ++i) (mean_for(0.5 * (lo + hi)) < density ? lo : hi) = 0.5 * (lo + hi);
  const double c = 0.5 * (lo + hi);
  p_.resize(n_ff);
  anchor_w_.resize(n_ff);
  std::vector<float> row(n_embd);
  for (int64_t r = 0; r < n_ff; ++r) p_[order[r]] = std::min(0.98, c * std::pow(r + 1.0, -0.7));
  for (int64_t i = 0; i < n_ff; ++i) {
    // P(fire) = P(W_i . z + w_anchor * K > 0) with z ~ isotropic of norm ~1, so W_i . z has
    // deviation |W_i| / sqrt(n_embd).
    gate_row(i, row.data());  // anchor weight still 0 here: the row norm of the rest
    double norm2 = 0;
    for (int64_t j = 1; j < n_embd; ++j) norm2 += double{row[j]} * row[j];
    anchor_w_[i] = static_cast<float>(normal_quantile(p_[i]) * std::sqrt(norm2) /
                                      (std::sqrt(static_cast<double>(n_embd)) * kAnchor));
  }
  // Down rows so the FFN adds a vector of norm ~0.01 to the residual: about density * n_ff
  // activations of order 1, each output element a sum over them, n_embd elements.
  down_scale_ = 0.01 / std::sqrt(density * static_cast<double>(n_ff) * static_cast<double>(n_embd));
}

void SparseLayerGenerator::gate_row(int64_t i, float* row) const {
  uint64_t s = mix(noise_seed_ ^ static_cast<uint64_t>(i));
  const float noise = kNoise * std::sqrt(3.0f / static_cast<float>(n_embd_));
  for (int64_t j = 0; j < n_embd_; ++j) row[j] = noise * uniform_from(s);
  for (int64_t m = 0; m < k_; ++m) {
    const float am = a_[i * k_ + m];
    const float* bm = b_.data() + m * n_embd_;
    for (int64_t j = 0; j < n_embd_; ++j) row[j] += am * bm[j];
  }
  row[0] = anchor_w_.empty() ? 0.0f : anchor_w_[i];
}

// Element (neuron i, output j) of the down projection from a hash of (i, j), so both layouts
// (ffn_down_t rows and ffn_down rows) can be streamed.
float SparseLayerGenerator::down_value(int64_t i, int64_t j) const {
  if (j == 0) return 0.0f;  // nothing writes the anchor
  uint64_t s = down_seed_ ^ (static_cast<uint64_t>(i) << 32 | static_cast<uint64_t>(j));
  return static_cast<float>(std::sqrt(3.0) * down_scale_) * uniform_from(s);
}

void SparseLayerGenerator::down_t_row(int64_t i, float* row) const {
  for (int64_t j = 0; j < n_embd_; ++j) row[j] = down_value(i, j);
}

void SparseLayerGenerator::down_row(int64_t j, float* row) const {
  down_row_part(j, 0, n_ff_, row);
}

void SparseLayerGenerator::down_row_part(int64_t j, int64_t begin, int64_t count,
                                         float* row) const {
  for (int64_t i = 0; i < count; ++i) row[i] = down_value(begin + i, j);
}

void SparseLayerGenerator::attn_output_row(int64_t r, int64_t cols, float* row) {
  // |attention output| is about sqrt(n_embd): rows scaled so the sum adds norm ~0.01.
  const float a = std::sqrt(3.0f) * 0.01f / static_cast<float>(n_embd_);
  for (int64_t j = 0; j < cols; ++j) row[j] = r == 0 ? 0.0f : a * uniform();
}

void SparseLayerGenerator::fc1_row(int64_t r, float* row) const {
  std::fill(row, row + n_embd_, 0.0f);
  if (r < 2 * k_) {
    const float sign = r < k_ ? 1.0f : -1.0f;
    const float* bm = b_.data() + (r % k_) * n_embd_;
    for (int64_t j = 1; j < n_embd_; ++j) row[j] = sign * bm[j] * norm_[j];
  } else if (r == 2 * k_) {
    row[0] = 1.0f;  // relu(anchor) = kAnchor: carries the bias
  }
}

void SparseLayerGenerator::fc2_row(int64_t i, float* row) const {
  std::fill(row, row + rank_, 0.0f);
  for (int64_t m = 0; m < k_; ++m) {
    row[m] = a_[i * k_ + m];
    row[k_ + m] = -a_[i * k_ + m];
  }
  row[2 * k_] = anchor_w_[i] * norm_[0];
}

float SparseLayerGenerator::threshold() const {
  // The noise part of the score has deviation about kNoise / sqrt(n_embd) * |z|, |z| ~ 1.
  return -2.0f * kNoise / std::sqrt(static_cast<float>(n_embd_));
}

double SparseLayerGenerator::expected_density() const {
  return std::accumulate(p_.begin(), p_.end(), 0.0) / static_cast<double>(p_.size());
}

}  // namespace strata
