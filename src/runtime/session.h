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

  // Runs tokens at the next positions and returns the logits of the last one, or with
  // all_logits those of every token (tokens.size() rows of n_vocab). Valid until the next call.
  // Tokens go through the layers in batches of up to kMaxBatch: each weight row is read once per
  // batch (matmat_multi), so a prompt costs far fewer passes over the weights than token by
  // token, with bit-identical results.
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);
  std::span<const float> eval(int32_t token) { return eval(std::span<const int32_t>(&token, 1)); }

  static constexpr int64_t kMaxBatch = 32;
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
  // One batch of n tokens at positions n_past_ .. n_past_ + n - 1.
  void forward(std::span<const int32_t> tokens, float* logits, bool all_logits);
  void attention_block(int64_t layer, int64_t n);
  void ffn_block(int64_t layer, int64_t n);
  // Prepares rows [0, n) of `rows` (stride `dim`) as inputs for weights of these types.
  void prepare_inputs(const float* rows, int64_t dim, int64_t n, bool need_q8);

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
  // Scratch, one row per token of the batch.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, logits_;
  std::vector<float> scores_;               // [batch][n_head][n_ctx]
  std::vector<float> rope_cos_, rope_sin_;  // [batch][n_rot / 2]
  std::vector<PreparedInput> inputs_;       // [batch]
};

}  // namespace strata
