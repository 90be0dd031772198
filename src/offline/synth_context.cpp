#include "offline/synth_context.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "offline/synth_sparse.h"

namespace strata {

namespace {
constexpr double kMinTheta = 0.0003, kMaxTheta = 0.06;  // rotary frequencies used (rad/token)
constexpr double kPeak = 16.0;  // A: score of the current position above distant ones
}  // namespace

ContextAttention::ContextAttention(const ModelConfig& c, double share)
    : n_embd_(c.n_embd),
      head_dim_(c.head_dim),
      n_head_(c.n_head),
      n_head_kv_(c.n_head_kv),
      width_(c.n_head_kv * c.head_dim) {
  if (!(share > 0.0 && share <= 0.95)) fail("--context must be in (0, 0.95]");
  width_ = std::min(width_, n_embd_);
  const int64_t pairs = head_dim_ / 2;
  std::vector<double> theta;
  pair_used_.assign(pairs, false);
  for (int64_t p = 0; p < pairs; ++p) {
    const double t = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * p / head_dim_);
    if (t >= kMinTheta && t <= kMaxTheta) pair_used_[p] = true, theta.push_back(t);
  }
  if (theta.empty())
    fail("--context: no rotary frequency in [0.001, 0.3] for head size {}", head_dim_);

  // Attention weights over distance d (long context): exp(A mean cos(d theta) - A), 1 at d = 0.
  double sum = 0, sum2 = 0;
  for (int64_t d = 0; d < 8192; ++d) {
    double m = 0;
    for (double t : theta) m += std::cos(d * t);
    const double w = std::exp(kPeak * (m / theta.size() - 1.0));
    sum += w, sum2 += w * w;
  }
  window_ = sum * sum / sum2;
  // The residual's non-anchor part after layer 0: the embedding's part e (norm s) plus the
  // windowed average of the normalized embeddings' first `width_` dims (norm c; it correlates
  // with e's slice, of norm s f with f = sqrt(width / n), by rho = 1 / sqrt(sum2), since the
  // window includes the token). Choose s = k sqrt(1 - share), c = k sqrt(share), with k such that
  // s^2 + c^2 + 2 rho f s c = 1: the residual keeps the norm SparseLayerGenerator's firing
  // probabilities assume. (A random direction's projections are as random whether it spans all
  // dims or a slice, so one layer's key/value width is enough.)
  const double n = static_cast<double>(n_embd_);
  const double f = std::sqrt(static_cast<double>(width_) / n), rho = 1.0 / std::sqrt(sum2);
  const double k = 1.0 / std::sqrt(1.0 + 2.0 * rho * f * std::sqrt(share * (1.0 - share)));
  const double s = k * std::sqrt(1.0 - share);
  embedding_scale_ = static_cast<float>(s);
  // RMSNorm turns the anchor (1) into x0 = sqrt(n / (1 + s^2)) and e's slice into a vector of
  // norm s f x0; ~window_ of those averaged have norm s f x0 / sqrt(window_), scaled to c.
  const double x0 = SparseLayerGenerator::kAnchor * std::sqrt(n / (1.0 + s * s));
  // Score per used pair: (w x0)^2 cos(d theta) / sqrt(head_dim); the pairs share kPeak.
  qk_weight_ = static_cast<float>(
      std::sqrt(kPeak * std::sqrt(static_cast<double>(head_dim_)) / theta.size()) / x0);
  out_weight_ = static_cast<float>(k * std::sqrt(share) * std::sqrt(window_) / (s * f * x0));
}

void ContextAttention::q_row(int64_t r, float* row) const {
  std::fill(row, row + n_embd_, 0.0f);
  const int64_t i = r % head_dim_;
  if (i % 2 == 0 && pair_used_[i / 2]) row[0] = qk_weight_;  // reads the anchor
}

void ContextAttention::k_row(int64_t r, float* row) const {
  q_row(r, row);
}

void ContextAttention::v_row(int64_t r, float* row) const {
  std::fill(row, row + n_embd_, 0.0f);
  if (r > 0 && r < width_) row[r] = 1.0f;  // never the anchor
}

void ContextAttention::o_row(int64_t r, float* row) const {
  const int64_t q_dim = n_head_ * head_dim_;
  std::fill(row, row + q_dim, 0.0f);
  if (r == 0 || r >= width_) return;
  // The first query head of the key/value head that carries this dim.
  const int64_t kv_head = r / head_dim_, group = n_head_ / n_head_kv_;
  row[kv_head * group * head_dim_ + r % head_dim_] = out_weight_;
}

}  // namespace strata
