// One layer's FFN for a batch, in each mode, as ops on a backend: neuron selection (dense,
// predictor, gate-first) apart from where the neurons are held (the FfnStore's segments).
// Reads its normalized input ws.xn (the layer block normalizes, as the architecture says) and,
// for the predictor, the residual ws.x; writes the FFN's output (with its down bias) to ws.proj.
// Each token uses only its own neurons: entries a token did not select count as zero, so a batch
// gives the result of its tokens one at a time.
#pragma once

#include "backends/backend.h"
#include "core/timeline.h"
#include "model/model.h"
#include "runtime/column_products.h"
#include "runtime/ffn_mode.h"
#include "runtime/forward_stats.h"
#include "runtime/input_sparsifier.h"
#include "runtime/resident_weights.h"
#include "runtime/time_spans.h"
#include "runtime/workspace.h"
#include "tiers/ffn_store.h"

namespace strata {
class LoraProducts;
}

namespace strata {

class FfnExecutor {
 public:
  // `store`: where the sparse modes find gate/up/down_t rows (unused in dense mode).
  // `weights`: the model in the backend's memory.
  FfnExecutor(const Model& model, const ResidentWeights& weights, Backend& backend, Workspace& ws,
              PreparedRows& in, FfnStore* store, FfnMode mode, bool check_predictor);
  ~FfnExecutor();
  FfnExecutor(const FfnExecutor&) = delete;
  FfnExecutor& operator=(const FfnExecutor&) = delete;

  // The predictor's span goes to times.predictor (and is taken out of times.ffn) via `spans`.
  // Non-zero activations are added to *nonzero, a counter in the backend's memory.
  void run(int64_t layer, int64_t n, int64_t token, FfnLayerStats& stats, uint64_t* nonzero,
           ForwardTimes& times, TimeSpans& spans, const FfnObserver& observer);
  // A split FFN (tiers/split_ffn_store.h) on a device: the CPU backend, its workspace and input
  // that compute the RAM segments, and its per-layer counters (host memory).
  struct HostSide {
    Backend* backend = nullptr;
    Workspace* ws = nullptr;
    PreparedRows* in = nullptr;
    uint64_t* nonzero = nullptr;  // layer l's at [l * nonzero_stride]
    int64_t nonzero_stride = 1;
  };
  void set_host_side(const HostSide& host);
  // Bytes the split moved between host and device beyond the store's: the normalized input
  // down and the RAM part's sum up, per layer (a mixture split by expert: the CPU's experts'
  // outputs up).
  uint64_t link_bytes() const { return link_bytes_; }
  // A dense mixture split by expert, since creation: token-neuron pairs computed and neuron rows
  // read (an expert's n_ff rows each time it runs) on the device and on the CPU.
  struct ExpertSplitCounts {
    uint64_t device_pairs = 0, host_pairs = 0, device_rows = 0, host_rows = 0;
  };
  const ExpertSplitCounts& expert_split() const { return expert_split_; }

  // Dense mode: the session's input sparsity at the FFN's hidden values and gate, counted in
  // layer l's at counters + l * stride (the part's memory).
  // `columns` (or null): input-sparse products for the batches that take them.
  void set_sparsifier(InputSparsifier* sparsifier, uint64_t* counters, int64_t stride,
                      ColumnProducts* columns) {
    sparsifier_ = sparsifier;
    sparsity_counters_ = counters;
    sparsity_stride_ = stride;
    columns_ = columns;
  }
  // --lora: the adapters' products beside the base weights' (null: none; dense, predict and
  // gate-first modes over a model in RAM, on the CPU: Session::check_lora).
  void set_lora(LoraProducts* lora) { lora_ = lora; }
  // A column-bundled model's FFN (every batch through the columns of its non-zero inputs;
  // set_sparsifier's ColumnProducts computes them).
  void set_flash_columns(FlashColumnStore* store) { flash_columns_ = store; }
  // Records the predictor, selection and products of each layer (null: none).
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // Sparse modes: sees each layer's selection (host backends only).
  void set_selection_observer(SelectionObserver observer) { selection_ = std::move(observer); }

  // Look-ahead (a bundled model on the CPU, decode and prompt batches): as soon as a layer's own reads are in,
  // the next layer's predictor runs on the residual as it stands (after this layer's
  // attention, before its FFN: Deja Vu's look-ahead, one step earlier) and the store reads
  // those neurons in the background while this layer's products and the next attention run.
  // `rows`: the largest batch that reads ahead (its buffers are for that many tokens).
  void set_lookahead(bool on, int64_t rows = 1);
  // The memory set_lookahead(true, rows) takes, for plans.
  static uint64_t lookahead_bytes(const Model& model, int64_t rows);

 private:
  void dense(int64_t layer, int64_t n, int64_t token, FfnLayerStats& stats, uint64_t* nonzero,
             const FfnObserver& observer);
  // The dense FFN's products, row-major, through the column copies (cols) or from the flash
  // tier's column bundles (flash_columns_): gate/up into ws.gate/ws.up, down into ws.proj.
  void gate_up_products(int64_t layer, int64_t n, int64_t token, const LayerColumns* cols);
  void down_products(int64_t layer, int64_t n, int64_t token, const LayerColumns* cols, float* h);
  void sparse(int64_t layer, int64_t n, int64_t token, FfnLayerStats& stats, uint64_t* nonzero,
              ForwardTimes& times, TimeSpans& spans);
  // A mixture of experts' layer (runtime/ffn_mixture.cpp): the router, each token's top k
  // (model/expert_routing.h), each chosen expert computed once for the tokens that chose it,
  // then each token's outputs weighted and summed in the order of its choice.
  // An observer sees the layer as the sparse modes do: activations [n][ffn_neurons], each
  // token's unchosen experts' neurons zero.
  // Split by expert (a host side is set): the experts this device holds are queued first, the
  // CPU computes the other chosen experts meanwhile and uploads their outputs to their slots.
  void mixture(int64_t layer, int64_t n, FfnLayerStats& stats, uint64_t* nonzero,
               ForwardTimes& times, TimeSpans& spans, const FfnObserver& observer);
  // Where an expert runs: a backend, its workspace, prepared input and non-zero counter.
  struct Side {
    Backend* backend;
    Workspace* ws;
    PreparedRows* in;
    uint64_t* nonzero;
  };
  // An expert's biases (gpt-oss) in the side's memory; null: none.
  struct ExpertBiases {
    const float *gate = nullptr, *up = nullptr, *down = nullptr;
  };
  // Expert e's biases among a layer's stacked ones (`vec`: the layer's vectors on that side).
  template <typename Vec>
  ExpertBiases biases_of(const Vec& vec, int64_t e) const;
  // One expert over the rows of its tokens (expert_rows_, expert_slots_) of side.ws->xn, its
  // outputs to their choice slots of side.ws->expert_out.
  void run_expert(const Side& side, const ExpertMatrices& x, const ExpertBiases& biases, int64_t n,
                  FfnLayerStats& stats, float* observed);
  // The router's logits to the host and each token's top k (chosen_, mix_weights_).
  void route(int64_t layer, int64_t n);
  // A sparse mode's first selection of a mixture's neurons: route, then each token's dense
  // expert weights (expert_weights_, uploaded to ws.expert_weights) and the experts chosen by
  // any token (chosen_experts_).
  void route_to_neurons(int64_t layer, int64_t n);
  // One expert's dense FFN for `count` rows of x (n_embd each) into out (n_embd each); with
  // `observed` (host memory), row i's activations also go to observed + rows[i] * stride.
  void expert_ffn(const Side& side, const ExpertMatrices& e, const ExpertBiases& biases,
                  const float* x, int64_t count, float* out, FfnLayerStats& stats,
                  float* observed = nullptr, const int64_t* rows = nullptr, int64_t stride = 0);
  // The predictor of `layer` on ws.x for n rows, prepared in `in`, into hidden/scores/mask.
  void predict(int64_t layer, int64_t n, PreparedRows& in, float* hidden, float* scores,
               uint8_t* mask);
  void predict(int64_t layer, int64_t n) {  // into ws.mask
    predict(layer, n, in_, ws_.pred_hidden, ws_.pred_scores, ws_.mask);
  }
  // Look-ahead: layer's predicted neurons to the store (its own buffers: the current layer's
  // selection and prepared input stay as they are).
  void prefetch(int64_t layer, int64_t n, int64_t token);
  // A mixture: y = the rows of m (one per neuron of every expert) of the chosen experts only,
  // for the prepared batch, into their places of a [n][ffn_neurons] output.
  void chosen_expert_rows(const MatrixView& m, float* y);
  void gate_first(int64_t layer, int64_t n);  // ws.mask from the dense gate (ws.gate / ws.up)
  void compute_segments(int64_t layer, NeuronList& list, int64_t n, int64_t token,
                        uint64_t* nonzero, ForwardTimes& times, TimeSpans& spans);
  // The up rows' biases (null: none) go onto the gathered values, by neuron id.
  void gather_segment(int64_t layer, const FfnSegment& s, int64_t n, const float* up_bias);
  static std::span<const int32_t> segment_ids(const FfnSegment& s);
  void add_down_bias(const ResidentLayer& w, int64_t n);
  void host_segment(int64_t layer, FfnSegment& s, int64_t n, float* out);
  // Split reads of a partial segment (held on the host) on `be` with its workspace and input.
  void split_segment(Backend& be, Workspace& w, PreparedRows& in, FfnSegment& s, int64_t n,
                     const float* up_bias);
  void check_prediction(int64_t layer, int64_t n, FfnLayerStats& stats);

  const Model& model_;
  const ResidentWeights& weights_;
  const ModelConfig& c_;
  Backend& backend_;
  Workspace& ws_;
  PreparedRows& in_;
  FfnStore* store_;
  FfnMode mode_;
  bool check_predictor_;
  Buffer all_ids_;               // dense FFN of files with only ffn_down_t: 0 .. n_ff - 1
  std::vector<int32_t> active_;  // split reads: neurons whose rest is read
  HostSide host_;
  // A mixture's routing on the host: logits [n][n_expert], choices and weights [n][k], and one
  // expert's tokens (their batch rows and choice slots).
  std::vector<float> router_logits_, mix_weights_;
  // A shared expert's gate logits [n], and the dense mixture's weights [n][k (+1 shared)].
  std::vector<float> shared_logits_, slot_weights_;
  std::vector<int32_t> chosen_;
  std::vector<int64_t> expert_rows_, expert_slots_;
  std::vector<float> expert_weights_;  // [n][n_expert]
  std::vector<float> observed_;        // an observer's view of a mixture: [n][ffn_neurons]
  std::vector<int32_t> chosen_experts_;
  std::vector<MatrixView> expert_views_;  // the chosen experts' deciding rows
  std::vector<RowsJob> expert_jobs_;
  uint64_t link_bytes_ = 0;
  ExpertSplitCounts expert_split_;
  SelectionObserver selection_;
  InputSparsifier* sparsifier_ = nullptr;
  uint64_t* sparsity_counters_ = nullptr;
  int64_t sparsity_stride_ = 0;
  ColumnProducts* columns_ = nullptr;
  FlashColumnStore* flash_columns_ = nullptr;
  LoraProducts* lora_ = nullptr;
  Timeline* timeline_ = nullptr;
  // Look-ahead's own predictor buffers (host memory: look-ahead runs on the CPU).
  struct LookAhead {
    int64_t rows = 1;
    std::unique_ptr<PreparedRows> in;
    std::vector<float> hidden, scores;
    std::vector<uint8_t> mask, need;
    std::vector<int32_t> ids;
  };
  std::unique_ptr<LookAhead> ahead_;
};

}  // namespace strata
