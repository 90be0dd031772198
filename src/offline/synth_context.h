// Attention weights that give a synthetic sparse model local context, as real text has: the
// residual stream of token t carries a recency-weighted average of the last few tokens, so
// consecutive tokens fire overlapping sets of FFN neurons (what windowing in the flash tier
// exploits). Without it every token's activations depend on that token alone.
//
// How: layer 0's attention heads read only the anchor dimension (constant per token) into
// q and k, on the rotary pairs whose frequencies lie in [0.001, 0.3]. After RoPE the score between
// positions t and j is A * mean_p cos((t - j) theta_p): highest at j = t, falling like a Gaussian
// over ~25 tokens and flat (exp(-A) below the peak) beyond. v copies the normalized residual's
// first w dims (w: the key/value width) and attn_output writes them back scaled, so the residual
// gains the windowed average of that slice. The embedding's own part shrinks so the residual keeps
// its norm and each neuron's firing probability (SparseLayerGenerator) still holds: `share` is the
// part of the residual's variance that is context.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace strata {

class ContextAttention {
 public:
  ContextAttention(const ModelConfig& c, double share);

  float embedding_scale() const { return embedding_scale_; }  // for the non-anchor dims
  double window_tokens() const { return window_; }            // 1 / sum of squared weights

  // Rows of layer 0's projections (n_embd values each; o_row: q_dim values).
  void q_row(int64_t r, float* row) const;  // r < n_head * head_dim
  void k_row(int64_t r, float* row) const;  // r < n_head_kv * head_dim
  void v_row(int64_t r, float* row) const;  // r < n_head_kv * head_dim
  void o_row(int64_t r, float* row) const;  // r < n_embd

 private:
  int64_t n_embd_, head_dim_, n_head_, n_head_kv_, width_;
  std::vector<bool> pair_used_;  // per rotary pair of a head
  float qk_weight_ = 0, out_weight_ = 0, embedding_scale_ = 1;
  double window_ = 1;
};

}  // namespace strata
