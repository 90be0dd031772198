// One sequence's inference state: KV cache, scratch buffers and the forward pass of a
// LLaMA-family model (RMSNorm, rotary attention with grouped-query heads, FFN variants).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matvec.h"
#include "model/model.h"

namespace strata {

// Time spent per part of the forward pass, accumulated over calls.
struct ForwardTimes {
  double attention = 0;  // norms, q/k/v/o products, rotary, attention itself
  double ffn = 0;
  double output = 0;  // final norm and the vocabulary projection
};

class Session {
 public:
  Session(const Model& model, int64_t n_ctx, ThreadPool& pool);

  // Runs one token at the next position and returns the logits (valid until the next call).
  std::span<const float> eval(int32_t token);
  // Runs tokens in order; returns the logits after the last one.
  std::span<const float> eval(std::span<const int32_t> tokens);
  void reset() { n_past_ = 0; }

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  const ForwardTimes& times() const { return times_; }
  // Per layer: FFN hidden activations that were exactly zero, and all of them, since creation.
  // The measure of activation sparsity that the sparse FFN paths exploit.
  const std::vector<uint64_t>& ffn_zeros() const { return ffn_zeros_; }
  uint64_t ffn_activations_per_layer() const { return ffn_activations_; }
  uint64_t kv_cache_bytes() const { return (k_cache_.size() + v_cache_.size()) * sizeof(float); }

 private:
  void attention_block(int64_t layer, int64_t pos);
  void ffn_block(int64_t layer);

  const Model& model_;
  const ModelConfig& c_;
  const CpuKernels& kernels_;
  ThreadPool& pool_;
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  ForwardTimes times_;
  std::vector<uint64_t> ffn_zeros_;
  uint64_t ffn_activations_ = 0;

  // Per layer [n_ctx][n_head_kv * head_dim].
  std::vector<float> k_cache_, v_cache_;
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, logits_;
  std::vector<float> scores_;  // [n_head][n_ctx]
  std::vector<float> rope_cos_, rope_sin_;
  PreparedInput input_;
};

}  // namespace strata
