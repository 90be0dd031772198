// One sequence's inference state: KV cache, scratch buffers and the forward pass of a
// LLaMA-family model (RMSNorm, rotary attention with grouped-query heads, FFN variants).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "core/anonymous_memory.h"
#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matvec.h"
#include "model/model.h"
#include "tiers/neuron_cache.h"

namespace strata {

// Time spent per part of the forward pass, accumulated over calls.
struct ForwardTimes {
  double attention = 0;  // norms, q/k/v/o products, rotary, attention itself
  double predictor = 0;  // activation predictors (predict mode)
  double ffn = 0;        // the FFN proper, including neuron selection
  double output = 0;     // final norm and the vocabulary projection
};

// How the FFN is computed.
//   dense:      every neuron (the reference).
//   predict:    the layer's predictor picks neurons; gate/up rows and ffn_down_t rows are
//               computed for those only. Approximate where the predictor misses a neuron.
//   gate-first: ReGLU/dReLU/ReLU only: the gate (up for ReLU) is computed densely, then up and
//               down only where it fired. Exact, no predictor needed, saves up to 2/3 of the FFN.
enum class FfnMode { Dense, Predict, GateFirst };
const char* ffn_mode_name(FfnMode m);

struct SessionOptions {
  FfnMode ffn = FfnMode::Dense;
  // Predict mode: also compute the true activations to measure the predictor's recall.
  bool check_predictor = false;
  // Bundled models (flash tier): neuron slots per layer's RAM cache (0: every neuron), the
  // window in tokens, and where bundles are read from (null: the model file, direct I/O).
  int64_t cache_neurons = 0;
  int window = 5;
  BundleSource* source = nullptr;
  // Threads that issue bundle reads (each blocks in pread): the number of reads in flight.
  int io_threads = 16;
  // Measured disk behaviour for read merging (strata probe-storage); null: a fixed rule.
  const StorageProfile* storage = nullptr;
  // Decode of a bundled model: right after layer l's FFN, layer l+1's predictor runs on the
  // residual as it is and its neurons are read in the background while layer l+1's attention
  // computes (Deja Vu's look-ahead). Values never change; only when reads happen. Off by
  // default: on the disk measured (docs/FLASH.md) it gave no gain, the reads being the
  // bottleneck either way.
  bool lookahead = false;
  // Bundled ReLU-family models: a missing neuron's deciding row (gate, or up without a gate) is
  // read first and the rest only when it comes out positive for a token that needs the neuron;
  // the others' output is zero anyway. Fewer bytes for the predictor's false positives, one
  // more round of reads per layer. Same values as whole reads. Off by default: on the disk
  // measured (docs/FLASH.md) it read 23% fewer bytes but decoded 20% slower.
  bool split_reads = false;
  // Bundled models: per layer, neurons to pin in the cache (sorted; the profile's hottest,
  // see Session's constructor); empty: none.
  std::vector<std::vector<int32_t>> pinned;
  // Element types of the KV cache (llama.cpp's -ctk / -ctv): F32 or F16. F16 halves the cache
  // (2 GiB instead of 4 at 7B with 4096 positions) at F16's rounding of each key and value.
  DType k_type = DType::F32, v_type = DType::F32;
};

// Per layer, counted over (token, neuron) pairs since the session began.
struct FfnLayerStats {
  uint64_t computed = 0;  // neurons whose up/down rows were computed (all in dense mode)
  uint64_t nonzero = 0;   // activations that came out non-zero
  // check_predictor only: truly active neurons, predicted ones, and predicted among the active.
  uint64_t truly_active = 0, predicted = 0, predicted_and_active = 0;
};

// Called in dense mode after each layer's FFN activation for a batch of n tokens, with the
// residual stream entering the FFN (before ffn_norm; n rows of n_embd) and the activations h
// (n rows of n_ff): what the profiler counts and predictors are trained on.
using FfnObserver =
    std::function<void(int64_t layer, int64_t n, const float* residual, const float* h)>;

// out = x / rms(x) * weight, the sum in double precision.
void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps);

class Session {
 public:
  // Sparse modes need ffn_down_t in every layer (Model::ensure_down_t), predict mode
  // predictors; both fail here with a message saying so.
  Session(const Model& model, int64_t n_ctx, ThreadPool& pool, SessionOptions options = {});
  // Fails with a one-line message when the options cannot apply to the model (a mode it
  // cannot run, --check-predictor outside predict mode). The constructor calls it; the CLI
  // calls it before preparing the model for the mode.
  static void check_options(const Model& model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs tokens at the next positions and returns the logits of the last one, or with
  // all_logits those of every token (tokens.size() rows of n_vocab). Valid until the next call.
  // Tokens go through the layers in batches of up to kMaxBatch (64, as a llama-bench pp64
  // ubatch; 32 measured 7% slower on Q8_0): each weight row is read once per batch
  // (matmat_multi), so a prompt costs far fewer passes over the weights than token by token,
  // with the same results within rounding (bit-identical for interleaved Q4_0/Q8_0).
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);
  std::span<const float> eval(int32_t token) { return eval(std::span<const int32_t>(&token, 1)); }

  static constexpr int64_t kMaxBatch = 64;
  void reset() { n_past_ = 0; }
  // Keeps positions 0 .. n - 1 and forgets the rest (the next eval overwrites their KV entries):
  // how a server reuses the prompt prefix two requests share.
  void truncate(int64_t n) { n_past_ = n < 0 ? 0 : (n < n_past_ ? n : n_past_); }

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  const ForwardTimes& times() const { return times_; }
  // Per layer: FFN hidden activations that were exactly zero, and all of them, since creation.
  // The measure of activation sparsity that the sparse FFN paths exploit.
  std::vector<uint64_t> ffn_zeros() const;
  uint64_t ffn_activations_per_layer() const { return ffn_activations_; }
  const std::vector<FfnLayerStats>& ffn_stats() const { return ffn_stats_; }
  const SessionOptions& options() const { return options_; }
  // Flash tier: the per-layer caches (empty unless the model is bundled).
  const std::vector<std::unique_ptr<NeuronCache>>& neuron_caches() const { return caches_; }
  NeuronCacheStats flash_stats() const;  // summed over layers
  uint64_t tokens_evaluated() const { return tokens_evaluated_; }
  void set_ffn_observer(FfnObserver observer);
  uint64_t kv_cache_bytes() const { return k_cache_.size() + v_cache_.size(); }
  // Bytes of a KV cache for n_ctx positions with these element types.
  static uint64_t kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type);

 private:
  // One batch of n tokens at positions n_past_ .. n_past_ + n - 1.
  void forward(std::span<const int32_t> tokens, float* logits, bool all_logits);
  void attention_block(int64_t layer, int64_t n);
  void ffn_block(int64_t layer, int64_t n);
  const uint8_t* embedding_row(int32_t token);
  void ffn_activation(const float* gate, const float* up, float* h, int64_t count) const;
  // Predict / gate-first (session_sparse_ffn.cpp): fills proj_ with the FFN output.
  void sparse_ffn(int64_t layer, int64_t n);
  void predict_neurons(int64_t layer, int64_t n);   // mask_ from the predictor
  void check_prediction(int64_t layer, int64_t n);  // ffn_stats_ truth counts
  // h_c_ for compact entries [begin, end) of every token; returns the non-zero count.
  uint64_t activate(int64_t n, int64_t begin, int64_t end);
  // Flash tier: gate/up/down for `ids` from the layer's neuron cache into proj_.
  uint64_t bundled_ffn(int64_t layer, int64_t n, std::span<const int32_t> ids,
                       std::span<const PreparedInput> in);
  // Prepares rows [0, n) of `rows` (stride `dim`) as inputs for weights of these types.
  void prepare_inputs(const float* rows, int64_t dim, int64_t n, bool need_q8);

  const Model& model_;
  const ModelConfig& c_;
  const CpuKernels& kernels_;
  ThreadPool& pool_;
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  SessionOptions options_;
  ForwardTimes times_;
  std::vector<FfnLayerStats> ffn_stats_;
  FfnObserver observer_;
  std::vector<int32_t> split_active_;  // bundled_ffn: neurons whose rest is read
  int embedding_fd_ = -1;              // bundled models: the file, for embedding rows
  std::vector<uint8_t> embedding_row_;
  uint64_t ffn_activations_ = 0;

  // Per layer [n_ctx][n_head_kv * head_dim].
  AnonymousMemory k_cache_, v_cache_;  // [layer][position][kv_dim] of k_type / v_type
  // Scratch, one row per token of the batch.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, logits_;
  std::vector<float> scores_;               // [batch][n_head][n_ctx]
  std::vector<float> rope_cos_, rope_sin_;  // [batch][n_rot / 2]
  std::vector<PreparedInput> inputs_;       // [batch]
  // Sparse FFN scratch: per-token selection [batch][n_ff], the union of selected neurons, and
  // compact values [batch][ids] (stride n_ff).
  std::vector<uint8_t> mask_, need_;
  std::vector<int32_t> ids_;
  std::vector<float> gate_c_, up_c_, h_c_, pred_hidden_, pred_scores_;
  // Flash tier.
  std::unique_ptr<BundleSource> own_source_;
  BundleSource* source_ = nullptr;
  std::vector<std::unique_ptr<NeuronCache>> caches_;
  std::unique_ptr<ThreadPool> io_pool_;
  std::vector<int32_t> slots_;
  std::vector<float> pass_out_;         // a later pass's down projection, added to proj_
  std::vector<int32_t> reordered_ids_;  // multi-pass layers: cached neurons first
  // Look-ahead reads in flight for one layer (joined before that layer's own fetch).
  std::thread lookahead_thread_;
  std::vector<int32_t> lookahead_ids_, lookahead_slots_;
  void start_lookahead(int64_t layer);
  void finish_lookahead();
  std::vector<uint8_t> reordered_need_;
  int64_t clock_ = 0;  // tokens seen, for windowing (never reset)
  uint64_t tokens_evaluated_ = 0;
};

}  // namespace strata
