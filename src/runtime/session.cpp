#include "runtime/session.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "runtime/embedding_rows.h"
#include "runtime/ffn_executor.h"
#include "runtime/kv_cache.h"
#include "runtime/workspace.h"
#include "tiers/flash_ffn_store.h"

namespace strata {

const char* ffn_mode_name(FfnMode m) {
  switch (m) {
    case FfnMode::Dense:
      return "dense";
    case FfnMode::Predict:
      return "predict";
    case FfnMode::GateFirst:
      return "gate-first";
  }
  return "?";
}

namespace {

int64_t largest_predictor_rank(const ModelWeights& w) {
  int64_t rank = 0;
  for (const auto& l : w.layers) rank = std::max(rank, l.predictor.rank());
  return rank;
}

WorkspaceShape workspace_shape(const Model& m, int64_t n_ctx, FfnMode mode) {
  return WorkspaceShape::of(m.config, n_ctx, Session::kMaxBatch, mode, m.weights.bundled,
                            largest_predictor_rank(m.weights));
}

// Seconds from `start` to now on the backend's timeline, added to `total`.
void add_elapsed(Backend& b, const Event& start, double& total) {
  total += b.elapsed(start, b.record());
}

}  // namespace

Session::Session(const Model& model, int64_t n_ctx, ThreadPool& pool, SessionOptions options)
    : Session(model, n_ctx, std::make_unique<CpuBackend>(pool), nullptr, std::move(options)) {}

Session::Session(const Model& model, int64_t n_ctx, Backend& backend, SessionOptions options)
    : Session(model, n_ctx, nullptr, &backend, std::move(options)) {}

Session::Session(const Model& model, int64_t n_ctx, std::unique_ptr<Backend> own, Backend* backend,
                 SessionOptions options)
    : model_(model),
      c_(model.config),
      own_backend_(std::move(own)),
      backend_(backend != nullptr ? *backend : *own_backend_),
      n_ctx_(n_ctx),
      options_(std::move(options)) {
  if (n_ctx <= 0) fail("context size must be positive, got {}", n_ctx);
  if (c_.n_head / c_.n_head_kv > kMaxHeadsPerGroup)
    fail("{} query heads per key/value head: at most {} are supported", c_.n_head / c_.n_head_kv,
         kMaxHeadsPerGroup);
  check_options(model, options_);
  const ModelWeights& mw = model.weights;
  if (options_.ffn != FfnMode::Dense && !mw.has_down_t && !mw.bundled)
    fail("the sparse FFN needs ffn_down_t in every layer (Model::ensure_down_t)");
  kv_ = std::make_unique<KvCache>(backend_, c_, n_ctx, options_.k_type, options_.v_type);
  ws_ = std::make_unique<Workspace>(backend_, workspace_shape(model, n_ctx, options_.ffn));
  in_ = backend_.make_prepared(kMaxBatch);
  embedding_ = std::make_unique<EmbeddingRows>(model);
  ffn_stats_.assign(static_cast<size_t>(c_.n_layer), {});
  if (options_.ffn != FfnMode::Dense) make_store();
  ffn_ = std::make_unique<FfnExecutor>(model, backend_, *ws_, *in_, store_.get(), options_.ffn,
                                       options_.check_predictor);
}

void Session::make_store() {
  const ModelWeights& mw = model_.weights;
  if (!mw.bundled) {
    for (const LayerWeights& l : mw.layers)
      ram_layers_.push_back({l.ffn_gate, l.ffn_up, l.ffn_down_t});
    store_ = std::make_unique<RamFfnStore>(ram_layers_);
    return;
  }
  BundleSource* source = options_.source;
  if (source == nullptr) {
    own_source_ = open_bundle_source(model_.file->path());
    source = own_source_.get();
  }
  FlashStoreOptions fo;
  fo.slots = options_.cache_slots;
  if (fo.slots.empty()) {
    const int64_t slots =
        options_.cache_neurons > 0 ? std::min(options_.cache_neurons, c_.n_ff) : c_.n_ff;
    fo.slots.assign(static_cast<size_t>(c_.n_layer), slots);
  }
  fo.window = options_.window;
  fo.io_threads = options_.io_threads;
  fo.storage = options_.storage;
  // Split reads only where a non-positive deciding row means a zero output (ReLU family).
  fo.split_reads = options_.split_reads && c_.ffn != FfnActivation::SwiGLU;
  fo.pinned = options_.pinned;
  std::vector<uint64_t> offsets;
  for (const LayerWeights& l : mw.layers) offsets.push_back(l.bundles_offset);
  auto flash = std::make_unique<FlashFfnStore>(mw.bundle, c_.n_embd, std::move(offsets), *source,
                                               std::move(fo));
  flash_ = flash.get();
  store_ = std::move(flash);
}

Session::~Session() = default;

uint64_t Session::kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type) {
  return KvCache::bytes(c, n_ctx, k_type, v_type);
}

uint64_t Session::kv_cache_bytes() const {
  return kv_->bytes();
}

uint64_t Session::workspace_bytes(const Model& model, int64_t n_ctx, FfnMode mode) {
  return Workspace::bytes(workspace_shape(model, n_ctx, mode));
}

void Session::check_options(const Model& model, const SessionOptions& options) {
  const ModelWeights& mw = model.weights;
  for (DType t : {options.k_type, options.v_type})
    if (t != DType::F32 && t != DType::F16)
      fail("the KV cache holds f32 or f16, not {}", dtype_name(t));
  if (options.check_predictor && options.ffn != FfnMode::Predict)
    fail("--check-predictor needs --ffn predict (and a model with predictors)");
  if (options.ffn == FfnMode::Predict && !mw.has_predictors)
    fail(
        "--ffn predict needs activation predictors, which '{}' lacks (make them with strata "
        "train-predictors, or use --ffn gate-first for an exact sparse FFN)",
        model.file->path());
  if (options.ffn == FfnMode::GateFirst && model.config.ffn == FfnActivation::SwiGLU)
    fail("--ffn gate-first needs a ReLU-family FFN (reglu, drelu, relu); '{}' is swiglu",
         model.file->path());
  if (mw.bundled && options.ffn != FfnMode::Predict)
    fail("'{}' is bundled for the flash tier: it runs with --ffn predict and needs predictors",
         model.file->path());
  if (mw.bundled && options.check_predictor)
    fail("--check-predictor needs the dense FFN, which a bundled model keeps on flash");
}

std::vector<uint64_t> Session::ffn_zeros() const {
  std::vector<uint64_t> zeros;
  for (const FfnLayerStats& s : ffn_stats_) zeros.push_back(ffn_activations_ - s.nonzero);
  return zeros;
}

const std::vector<std::unique_ptr<NeuronCache>>& Session::neuron_caches() const {
  static const std::vector<std::unique_ptr<NeuronCache>> none;
  return flash_ != nullptr ? flash_->caches() : none;
}

NeuronCacheStats Session::flash_stats() const {
  return flash_ != nullptr ? flash_->stats() : NeuronCacheStats{};
}

void Session::set_ffn_observer(FfnObserver observer) {
  if (observer && options_.ffn != FfnMode::Dense)
    fail("FFN observers need the dense FFN (they see every activation)");
  observer_ = std::move(observer);
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) fail("no tokens to evaluate");
  for (int32_t t : tokens)
    if (t < 0 || t >= c_.n_vocab)
      fail("token id {} is outside the vocabulary (size {})", t, c_.n_vocab);
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    fail("context is full ({} tokens); use a larger -c", n_ctx_);
  const int64_t n = static_cast<int64_t>(tokens.size());
  tokens_evaluated_ += static_cast<uint64_t>(n);
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * c_.n_vocab));
  for (int64_t start = 0; start < n; start += kMaxBatch) {
    const int64_t b = std::min(kMaxBatch, n - start);
    forward(tokens.subspan(static_cast<size_t>(start), static_cast<size_t>(b)),
            logits_.data() + (all_logits ? start * c_.n_vocab : 0), all_logits);
  }
  return logits_;
}

void Session::embed(std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), half = c_.n_rot / 2;
  for (int64_t b = 0; b < n; ++b) {
    backend_.dequantize_row(model_.weights.token_embd.type, embedding_->row(tokens[b]),
                            ws_->x + b * c_.n_embd, c_.n_embd);
    // Rotation angles for this position: theta_i = pos * base^(-2i / n_rot).
    const double pos = static_cast<double>(n_past_ + b);
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          pos * std::pow(static_cast<double>(c_.rope_freq_base),
                         -2.0 * static_cast<double>(i) / static_cast<double>(c_.n_rot));
      ws_->rope_cos[b * half + i] = static_cast<float>(std::cos(theta));
      ws_->rope_sin[b * half + i] = static_cast<float>(std::sin(theta));
    }
  }
}

void Session::forward(std::span<const int32_t> tokens, float* logits, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  embed(tokens);
  const bool lookahead = flash_ != nullptr && options_.lookahead && n == 1;
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    Event start = backend_.record();
    attention_block(l, n);
    add_elapsed(backend_, start, times_.attention);
    start = backend_.record();
    const double predictor_before = times_.predictor;
    ffn_->run(l, n, clock_ + n - 1, ffn_stats_[static_cast<size_t>(l)], times_, observer_);
    backend_.add(ws_->x, ws_->proj, n * c_.n_embd);
    if (l == 0) ffn_activations_ += static_cast<uint64_t>(n * c_.n_ff);
    add_elapsed(backend_, start, times_.ffn);
    times_.ffn -= times_.predictor - predictor_before;
    if (lookahead && l + 1 < c_.n_layer) {
      start = backend_.record();
      ffn_->prefetch(l + 1, clock_ - 1);
      add_elapsed(backend_, start, times_.predictor);
    }
  }
  const Event start = backend_.record();
  output(n, logits, all_logits);
  add_elapsed(backend_, start, times_.output);
  n_past_ += n;
  clock_ += n;
}

void Session::attention_block(int64_t l, int64_t n) {
  const LayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
  const HeadShape heads{c_.n_head, c_.n_head_kv, c_.head_dim};
  const int64_t q_dim = heads.q_dim(), kv_dim = heads.kv_dim();
  Workspace& ws = *ws_;
  backend_.rms_norm(ws.x, w.attn_norm.data(), ws.xn, n, c_.n_embd, c_.rms_eps);
  backend_.prepare(*in_, ws.xn, c_.n_embd, n, {w.attn_q.type, w.attn_k.type, w.attn_v.type});
  const RowsJob qkv[3] = {
      {&w.attn_q, ws.q, q_dim}, {&w.attn_k, ws.k, kv_dim}, {&w.attn_v, ws.v, kv_dim}};
  backend_.matmul(qkv, *in_);
  const KvLayer kv = kv_->layer(l);
  backend_.rope_and_store(ws.q, ws.k, ws.v, n, heads, {ws.rope_cos, ws.rope_sin, c_.n_rot / 2}, kv,
                          n_past_);
  backend_.attention(ws.q, n, heads, kv, n_past_, n_ctx_, ws.scores, ws.attn);
  backend_.prepare(*in_, ws.attn, q_dim, n, {w.attn_output.type});
  const RowsJob o{&w.attn_output, ws.proj, c_.n_embd};
  backend_.matmul(std::span(&o, 1), *in_);
  backend_.add(ws.x, ws.proj, n * c_.n_embd);
}

void Session::output(int64_t n, float* logits, bool all_logits) {
  // Only the last token's logits unless all are asked for.
  const MatrixView& out = model_.weights.output;
  const int64_t first = all_logits ? 0 : n - 1;
  backend_.rms_norm(ws_->x + first * c_.n_embd, model_.weights.output_norm.data(), ws_->xn,
                    n - first, c_.n_embd, c_.rms_eps);
  backend_.prepare(*in_, ws_->xn, c_.n_embd, n - first, {out.type});
  const RowsJob job{&out, logits, c_.n_vocab};
  backend_.matmul(std::span(&job, 1), *in_);
  backend_.synchronize();  // the logits are read by the caller
}

}  // namespace strata
