// One sequence's inference state and the forward pass as a loop over layers, each wired as
// its architecture says (layer_block.cpp, model/arch/): attention (the norm, q/k/v products
// and biases, RoPE and the KV append, grouped-query attention, the output product) and the FFN
// (ffn_executor.h: the mode's neuron selection, gate/up/down from the FFN store), every op on one
// backend (backends/backend.h). Where the FFN's neurons live (RAM matrices, the flash tier's
// caches) is the store's business, what goes where the placement plan's (placement/plan.h, applied
// by planning/planned_session.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "core/timeline.h"
#include "model/model.h"
#include "runtime/ffn_mode.h"
#include "runtime/forward_stats.h"
#include "runtime/input_sparsifier.h"
#include "runtime/kv_cache.h"
#include "runtime/time_spans.h"
#include "tiers/bundle_source.h"
#include "tiers/neuron_cache.h"
#include "tiers/storage_profile.h"

namespace strata {

class DevicePart;
class EmbeddingRows;
class FfnStore;
class FlashFfnStore;
class FlashColumnStore;
class SplitFfnStore;
class LoraProducts;

// How a bundled model's FFN is read from flash (--window, --lookahead, --split-reads,
// --storage-profile): one value from the flags through planning to the session.
struct FlashReading {
  int window = 5;  // tokens a neuron stays cached after its last use
  // Decode of a bundled model: right after layer l's FFN, layer l+1's predictor runs on the
  // residual as it is and its neurons are read in the background (the transfer queue) while
  // layer l+1's attention computes (Deja Vu's look-ahead). Values never change; only when reads
  // happen. A session's default is off; a run's (RunRequest) on where the CPU computes alone.
  bool lookahead = false;
  // Bundled ReLU-family models: a missing neuron's deciding row (gate, or up without a gate) is
  // read first and the rest only when it comes out positive for a token that needs the neuron.
  // Same values as whole reads. Off by default: on the disk measured (docs/FLASH.md) it read
  // 23% fewer bytes but decoded 20% slower.
  bool split_reads = false;
  // Measured disk behaviour for read merging (strata probe-storage); null: a fixed rule.
  const StorageProfile* storage = nullptr;
};

struct SessionOptions {
  FfnMode ffn = FfnMode::Dense;
  // Predict mode: also compute the true activations to measure the predictor's recall.
  bool check_predictor = false;
  // Bundled models (flash tier): neuron slots of each layer's RAM cache (0: every neuron;
  // cache_slots, one per layer, when the plan gives each layer its own), how bundles are read,
  // and where from (null: the model file, direct I/O).
  int64_t cache_neurons = 0;
  std::vector<int64_t> cache_slots{};
  FlashReading flash{};
  BundleSource* source = nullptr;
  // Threads that issue bundle reads (each blocks in pread): the number of reads in flight.
  int io_threads = 16;
  // Column-bundled models (strata bundle --columns): the share of each layer's column bundles
  // its RAM caches hold, in (0, 1] (the plan's, from --ram-budget).
  double column_share = 1.0;
  // Bundled models: per layer, neurons to pin in the cache (sorted); empty: none.
  std::vector<std::vector<int32_t>> pinned{};
  KvTypes kv{};
  // Sequences the session holds at once (a server's slots, llama.cpp's -np), each with its own
  // n_ctx positions of the KV cache; one batch may mix tokens of any of them.
  int n_seq = 1;
  // A split FFN (PowerInfer's hybrid; predict mode): per layer the neurons held and computed on
  // the session's device (ascending ids), the rest computed from RAM by `host_backend` (the CPU
  // backend; required when the session's backend is a device) at the same time. Empty: no
  // split. A mixture in dense mode splits by whole experts (KTransformers'): the ids are every
  // neuron of the device's experts (expert e's neuron i is e * n_ff + i), the CPU computes the
  // other chosen experts.
  std::vector<std::vector<int32_t>> vram_neurons{};
  Backend* host_backend = nullptr;
  // Layers computed wholly on the CPU (`host_backend`: their attention, KV cache, predictor and
  // FFN) while the rest run on the session's device, the residual stream moving between them
  // (the plan's attention blocks on the CPU): 1 per such layer; empty: none. `output_on_host`:
  // the output head too.
  std::vector<uint8_t> host_layers{};
  bool output_on_host = false;
  // Training-free activation sparsity (runtime/input_sparsifier.h). Dense FFN only.
  InputSparsityChoice sparsity{};
  // Tokens per batch through the layers (llama.cpp's ubatch); 0: Session::kMaxBatch. More than
  // that (up to kMaxUbatch) on the CPU alone: a flash tier's prompt batch reads its union once.
  int64_t max_batch = 0;
  // > 0: the forward pass ends after this many layers, the output head reading their residual
  // (a self-speculative draft: the model's first layers, LayerSkip's early exit).
  int64_t exit_layer = 0;
};

// One token of a batch: its sequence (0 .. n_seq - 1), whether its logits are wanted, and
// whether its final hidden state is (after the output norm, what the output head reads: what
// embeddings pool, as llama.cpp's).
struct BatchToken {
  int32_t token = 0;
  int32_t seq = 0;
  bool logits = false;
  bool hidden = false;
};

class Session {
 public:
  // On the CPU backend over `pool`. Sparse modes need ffn_down_t in every layer
  // (Model::ensure_down_t), predict mode predictors; both fail here with a message saying so.
  Session(const Model& model, int64_t n_ctx, ThreadPool& pool, SessionOptions options = {});
  // On `backend`, which must outlive the session. On a device other than the host (a GPU,
  // the reference device) the weights the mode reads are copied into its memory; bundled
  // models, --check-predictor and FFN observers need the host.
  Session(const Model& model, int64_t n_ctx, Backend& backend, SessionOptions options = {});
  // Fails with a one-line message when the options cannot apply to the model (a mode it
  // cannot run, --check-predictor outside predict mode).
  static void check_options(const Model& model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs tokens at the next positions and returns the logits of the last one, or with
  // all_logits those of every token (tokens.size() rows of n_vocab). Valid until the next call.
  // Tokens go through the layers in batches of up to kMaxBatch (64, as a llama-bench pp64
  // ubatch; 32 measured 7% slower on Q8_0): each weight row is read once per batch, so a prompt
  // costs far fewer passes over the weights than token by token, with the same results within
  // rounding (bit-identical for interleaved Q4_0/Q8_0).
  std::span<const float> eval(std::span<const int32_t> tokens, bool all_logits = false);
  std::span<const float> eval(int32_t token) { return eval(std::span<const int32_t>(&token, 1)); }
  // Runs a batch of tokens of several sequences (continuous batching): each token at its
  // sequence's next position, a sequence's tokens in order. Returns the logits of the tokens
  // marked `logits`, in batch order (rows of n_vocab), valid until the next call. Each weight
  // row is read once per kMaxBatch tokens for all sequences; a token attends only to its own
  // sequence and uses only its own FFN neurons, so its logits are what it gives decoded alone
  // within rounding (bit for bit for interleaved Q4_0/Q8_0/Q4_K and the sparse modes' rows).
  std::span<const float> decode(std::span<const BatchToken> batch);
  // After decode: the final hidden states of the tokens marked `hidden`, in batch order (rows of
  // n_embd), valid until the next call.
  std::span<const float> hidden() const { return hidden_; }

  static constexpr int64_t kMaxBatch = 64;
  static constexpr int64_t kMaxUbatch = 512;
  int64_t max_batch() const { return max_batch_; }  // tokens per batch (options' max_batch)
  void reset() { std::fill(n_past_.begin(), n_past_.end(), 0); }
  // Keeps positions 0 .. n - 1 of a sequence and forgets the rest (the next eval overwrites
  // their KV entries): how a server reuses the prompt prefix two requests share.
  void truncate(int64_t n) { truncate(0, n); }
  void truncate(int seq, int64_t n);

  // Sequence `to` becomes the first n positions of sequence `from` (their KV entries copied):
  // choices of one prompt read it once.
  void copy_sequence(int from, int to, int64_t n);

  int64_t n_past() const { return n_past_[0]; }
  int64_t n_past(int seq) const { return n_past_.at(static_cast<size_t>(seq)); }
  int n_seq() const { return static_cast<int>(n_past_.size()); }
  int64_t n_ctx() const { return n_ctx_; }  // positions per sequence
  const ForwardTimes& times() const { return times_; }
  // Per layer: FFN hidden activations that were exactly zero, and all of them, since creation.
  std::vector<uint64_t> ffn_zeros() const;
  uint64_t ffn_activations_per_layer() const { return ffn_activations_; }
  const std::vector<FfnLayerStats>& ffn_stats() const { return ffn_stats_; }
  const SessionOptions& options() const { return options_; }
  const Backend& backend() const { return backend_; }
  // A split FFN: token-neuron pairs computed on the device and on the CPU (the RAM part of split
  // layers and every pair of the layers on the CPU) since creation.
  uint64_t split_device_pairs() const;
  uint64_t split_ram_pairs() const;
  // A split FFN since creation: bytes of neuron rows read on the device and in RAM (the split
  // layers' rest and every row of the layers on the CPU), and bytes moved between host and
  // device (selections, inputs, partial sums, the residual stream between layers).
  struct SplitTraffic {
    uint64_t device_row_bytes = 0, ram_row_bytes = 0, link_bytes = 0;
  };
  SplitTraffic split_traffic() const;
  // Flash tier: the per-layer caches (empty unless the model is bundled).
  const std::vector<std::unique_ptr<NeuronCache>>& neuron_caches() const;
  NeuronCacheStats flash_stats() const;  // summed over layers
  uint64_t tokens_evaluated() const { return tokens_evaluated_; }
  void set_ffn_observer(FfnObserver observer);
  // Every sparsity point's values before thresholding (host backends; input_sparsifier.h).
  void set_input_observer(InputObserver observer);
  // The thresholds in use, which calibration changes between trials, and what they kept.
  InputSparsifier& sparsifier() { return *sparsifier_; }
  const std::vector<InputDensity>& input_density() const { return sparsifier_->density(); }
  // Calibration: layer l alone on n rows (at most kMaxBatch) of x (host memory, n_embd each),
  // as the tokens at positions pos0 .. pos0 + n - 1 of sequence 0, whose cache rows of this
  // layer before pos0 are what earlier calls wrote; x becomes the layer's output.
  void replay_layer(int64_t l, float* x, int64_t n, int64_t pos0);
  // Calibration: the first layer's input (the embedding rows, with learned positions where the
  // model has them) of up to kMaxBatch tokens at positions pos0.. of sequence 0, to out (host).
  void embed_tokens(std::span<const int32_t> tokens, int64_t pos0, float* out);
  // Sparse modes on the host: each layer's selection (forward_stats.h).
  void set_selection_observer(SelectionObserver observer);
  // Records where each forward pass's time goes (core/timeline.h; CPU runs only; null: none).
  void set_timeline(Timeline* timeline);
  uint64_t kv_cache_bytes() const;
  // Bytes of a KV cache for n_ctx positions (of all sequences) with these element types.
  static uint64_t kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type);
  // Bytes of the scratch buffers a session of this shape allocates (the placement inventory)
  // on a device, or on the CPU (no score scratch: runtime/workspace.h).
  // `max_batch`: tokens per batch (0: kMaxBatch).
  static uint64_t workspace_bytes(const Model& model, int64_t n_ctx, FfnMode mode,
                                  bool input_columns = false, bool on_cpu = false,
                                  int64_t max_batch = 0);

 private:
  Session(const Model& model, int64_t n_ctx, std::unique_ptr<Backend> own, Backend* backend,
          SessionOptions options);
  void check_layout() const;
  // --lora: the adapters' products on the CPU, over the model in RAM (one line where not).
  void check_lora() const;
  // A device session: each weight it computes with is of a type its backend reads.
  void check_weight_types() const;
  // A dense mixture split by expert, and per layer the experts on the device (1 each).
  bool experts_split() const;
  std::vector<std::vector<uint8_t>> experts_held() const;
  void make_parts();
  // The store part 0's FFN reads in a sparse mode (the flash tier's, a split's or its RAM rows).
  FfnStore* make_stores();
  std::unique_ptr<FlashFfnStore> make_flash_store();
  std::unique_ptr<FlashColumnStore> make_column_store();
  BundleSource& bundle_source();  // options_.source, or the model file opened for direct I/O
  void check_batch(std::span<const BatchToken> batch) const;
  // One batch of up to kMaxBatch tokens, each at its sequence's next position; logits of the
  // marked tokens to `logits`, in order.
  void forward(std::span<const BatchToken> batch, float* logits, float* hidden);
  void place(std::span<const BatchToken> batch);  // positions and rotation angles
  void embed(std::span<const BatchToken> batch);
  // The part that computes a layer, the output head.
  DevicePart& part_of(int64_t layer) { return *parts_[layer_part_[static_cast<size_t>(layer)]]; }
  DevicePart& output_part() { return *parts_[output_part_]; }
  DevicePart* cpu_part() { return parts_.size() > 1 ? parts_[1].get() : nullptr; }
  bool on_cpu(int64_t layer) const;
  // The residual stream of the batch's n rows onto part `to`.
  void move_residual(size_t to, int64_t n);
  // The layer block (layer_block.cpp): the architecture's wiring of attention and FFN.
  void layer(DevicePart& p, int64_t layer, int64_t n);
  // Attention on ws.xn (normalized), its output projection (with its bias) to `out`.
  void attention_block(DevicePart& p, int64_t layer, int64_t n, float* out);
  // out = the architecture's norm of x (bias may be null).
  void norm(Backend& be, const float* x, const float* weight, const float* bias, float* out,
            int64_t n);
  // Pairs RoPE rotates per head: 0 for learned positions.
  int64_t rope_half() const;
  void output(std::span<const BatchToken> batch, float* logits, float* hidden);

  const Model& model_;
  const ModelConfig& c_;
  std::unique_ptr<Backend> own_backend_;
  Backend& backend_;
  int64_t n_ctx_;
  int64_t max_batch_;
  std::vector<int64_t> n_past_;      // per sequence
  std::vector<int64_t> pos_, base_;  // the batch's TokenPlaces
  // What attention sees of each token's sequence (pos_ and base_ without a sliding window; with
  // one, the window's first row as the base and the token's place in the window).
  std::vector<int64_t> seen_pos_, seen_base_;
  std::vector<float> rope_host_;     // the batch's cos then sin, uploaded to the workspace
  std::vector<BatchToken> one_seq_;  // eval()'s tokens as a batch
  SessionOptions options_;
  ForwardTimes times_;
  TimeSpans spans_;  // this pass's, resolved after its last synchronize
  std::vector<FfnLayerStats> ffn_stats_;
  FfnObserver observer_;
  Timeline* timeline_ = nullptr;
  std::unique_ptr<InputSparsifier> sparsifier_;
  std::unique_ptr<LoraProducts> lora_;  // --lora: the adapters' products (null: none)
  // TEAL with the model's column copies on the host: small batches take input-sparse products.
  bool columns_made_ = false;
  bool use_columns(int64_t n) const;
  uint64_t ffn_activations_ = 0;
  // parts_[0]: the session's backend; parts_[1]: the CPU beside a device, when the plan puts
  // layers or the output head there or the FFN is split. layer_part_: the plan's layer->part map.
  std::vector<std::unique_ptr<DevicePart>> parts_;
  std::vector<size_t> layer_part_;
  size_t output_part_ = 0;
  size_t residual_part_ = 0;  // where the residual stream is now
  std::unique_ptr<EmbeddingRows> embedding_;
  std::unique_ptr<BundleSource> own_source_;
  std::unique_ptr<FlashFfnStore> flash_;  // a bundled model's tier
  std::unique_ptr<FlashColumnStore> flash_columns_;  // a column-bundled model's tier
  std::unique_ptr<SplitFfnStore> split_;  // a split FFN: the device's hot rows over the rest
  uint64_t residual_link_bytes_ = 0;      // the residual stream moved between the parts
  std::vector<float> logits_;
  std::vector<float> hidden_;  // the marked tokens' final hidden states (hidden())
  Buffer device_logits_;  // a device's logits rows, downloaded into logits_
  int64_t clock_ = 0;     // tokens seen, for windowing (never reset)
  uint64_t tokens_evaluated_ = 0;
};

}  // namespace strata
