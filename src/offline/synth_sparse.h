// The weights that make a synthetic model's FFN sparse by construction, with predictors that
// work (docs/SPARSITY.md has the derivation):
//  - Hidden dimension 0 is an "anchor": every embedding row holds kAnchor there and no layer
//    writes to it (row 0 of attn_output and column 0 of ffn_down_t are zero), so after RMSNorm
//    it acts as a per-token bias input.
//  - Gate row i (up for plain ReLU) = A_i B + noise over the other dimensions, plus an anchor
//    weight that sets neuron i's firing probability p_i. The p_i follow a power law (a few hot
//    neurons, many cold ones) with mean `density`, hottest neurons at random positions.
//  - The predictor computes the low-rank part exactly: fc1 = [B'; -B'; e_0], fc2 = [A, -A, bias]
//    (relu(B'x) - relu(-B'x) = B'x), so it misses only through the noise; the threshold sits
//    two noise deviations below zero, for a recall near 0.98.
//  - Layer outputs (attn_output, ffn_down_t) are small, so the residual stream stays close to
//    the embedding and each layer's density close to the target.
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

class SparseLayerGenerator {
 public:
  static constexpr float kAnchor = 1.0f;
  static constexpr float kNoise = 0.15f;  // relative size of the part predictors cannot see

  SparseLayerGenerator(int64_t n_embd, int64_t n_ff, int64_t rank, double density, uint64_t seed);

  const std::vector<float>& ffn_norm() const { return norm_; }
  void gate_row(int64_t i, float* row) const;    // n_embd values
  void down_t_row(int64_t i, float* row) const;  // n_embd values
  void down_row(int64_t j, float* row) const;    // the same matrix row-major: n_ff values
  // Values [begin, begin + count) of down_row(j) (a mixture's expert: its neurons' share).
  void down_row_part(int64_t j, int64_t begin, int64_t count, float* row) const;
  void attn_output_row(int64_t r, int64_t cols, float* row);
  void fc1_row(int64_t r, float* row) const;  // n_embd values, r < rank
  void fc2_row(int64_t i, float* row) const;  // rank values
  float threshold() const;
  double expected_density() const;  // mean of the p_i

 private:
  float uniform();  // [-1, 1)
  float down_value(int64_t i, int64_t j) const;
  int64_t n_embd_, n_ff_, rank_, k_;
  uint64_t state_;
  std::vector<float> norm_;      // ffn_norm weights, anchor weight 1
  std::vector<float> a_;         // [n_ff][k]
  std::vector<float> b_;         // [k][n_embd], column 0 zero
  std::vector<float> noise_;     // [n_ff][n_embd] would be too big: regenerated per row seed
  std::vector<float> anchor_w_;  // gate weight on the anchor per neuron
  std::vector<double> p_;
  uint64_t noise_seed_, down_seed_;
  double down_scale_;
};

}  // namespace strata
