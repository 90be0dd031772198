#include "runtime/session.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "runtime/embedding_rows.h"
#include "runtime/ffn_executor.h"
#include "runtime/kv_cache.h"
#include "runtime/resident_weights.h"
#include "runtime/workspace.h"
#include "tiers/flash_ffn_store.h"
#include "tiers/split_ffn_store.h"

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

// `split`: an FFN in two parts (a split store), whose second part's sum needs pass_out as a
// bundled model's later passes do.
WorkspaceShape workspace_shape(const Model& m, int64_t n_ctx, FfnMode mode, bool split = false) {
  return WorkspaceShape::of(m.config, n_ctx, Session::kMaxBatch, mode, m.weights.bundled || split,
                            largest_predictor_rank(m.weights));
}

// Seconds from `start` to now on the backend's timeline, added to `total` when resolved.
void add_elapsed(Backend& b, const Event& start, double& total, TimeSpans& spans) {
  spans.add(start, b.record(), &total);
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
  if (options_.n_seq < 1) fail("a session holds at least one sequence, not {}", options_.n_seq);
  n_past_.assign(static_cast<size_t>(options_.n_seq), 0);
  const MatrixView& positions = model.weights.position_embd;
  if (positions.data != nullptr && n_ctx > positions.rows - c_.arch->position_offset)
    fail("a context of {} tokens is more than the {} positions '{}' has learned", n_ctx,
         positions.rows - c_.arch->position_offset, model.file->path());
  if (c_.n_head / c_.n_head_kv > kMaxHeadsPerGroup)
    fail("{} query heads per key/value head: at most {} are supported", c_.n_head / c_.n_head_kv,
         kMaxHeadsPerGroup);
  check_options(model, options_);
  const ModelWeights& mw = model.weights;
  if (options_.ffn != FfnMode::Dense && !mw.has_down_t && !mw.bundled)
    fail("the sparse FFN needs ffn_down_t in every layer (Model::ensure_down_t)");
  const bool host = backend_.device() == Device::Host;
  if (!host && options_.check_predictor)
    fail("--check-predictor counts on the host; run it without a GPU");
  const bool split = !options_.vram_neurons.empty();
  int64_t cpu_layers = 0;
  for (uint8_t h : options_.host_layers) cpu_layers += h != 0;
  const bool mixed = cpu_layers > 0 || options_.output_on_host;
  if (mixed) {
    if (host || options_.host_backend == nullptr)
      fail("layers on the CPU beside a device need a device session and the CPU backend");
    if (static_cast<int64_t>(options_.host_layers.size()) != c_.n_layer)
      fail("layers on the CPU: one flag for each of the {} layers", c_.n_layer);
    if (cpu_layers == c_.n_layer) fail("every layer on the CPU: run without a GPU");
  }
  if (mw.bundled && !host && !split)
    fail("a bundled model's FFN on a device is split: its plan names the neurons in VRAM");
  if (split) {
    if (options_.ffn != FfnMode::Predict)
      fail("a split FFN (neurons in VRAM, the rest in RAM or on flash) runs in predict mode");
    if (static_cast<int64_t>(options_.vram_neurons.size()) != c_.n_layer)
      fail("a split FFN needs VRAM neurons for each of the {} layers", c_.n_layer);
    if (!host && options_.host_backend == nullptr)
      fail("a split FFN on a device needs the CPU backend for its RAM part");
  }
  // A split FFN's device holds only its hot rows (the store copies them), not whole matrices.
  weights_ = std::make_unique<ResidentWeights>(model, backend_, options_.ffn, !split,
                                               options_.host_layers, options_.output_on_host);
  // Each layer's KV cache lives with its attention.
  int64_t on_device = 0, on_host = 0;
  for (int64_t l = 0; l < c_.n_layer; ++l) kv_index_.push_back(on_cpu(l) ? on_host++ : on_device++);
  kv_ = std::make_unique<KvCache>(backend_, c_, n_ctx * options_.n_seq, options_.k_type,
                                  options_.v_type, on_device);
  if (on_host > 0)
    host_kv_ = std::make_unique<KvCache>(*options_.host_backend, c_, n_ctx * options_.n_seq,
                                         options_.k_type, options_.v_type, on_host);
  ws_ = std::make_unique<Workspace>(backend_, workspace_shape(model, n_ctx, options_.ffn, split));
  in_ = backend_.make_prepared(kMaxBatch);
  embedding_ = std::make_unique<EmbeddingRows>(model);
  ffn_stats_.assign(static_cast<size_t>(c_.n_layer), {});
  if (options_.ffn != FfnMode::Dense) make_store();
  ffn_ = std::make_unique<FfnExecutor>(model, *weights_, backend_, *ws_, *in_, store_.get(),
                                       options_.ffn, options_.check_predictor);
  if ((split || mixed) && !host) {
    Backend& cpu = *options_.host_backend;
    host_ws_ = std::make_unique<Workspace>(cpu, workspace_shape(model, n_ctx, options_.ffn, split));
    host_in_ = cpu.make_prepared(kMaxBatch);
    host_counts_.assign(static_cast<size_t>(c_.n_layer), 0);
    if (split) ffn_->set_host_side({&cpu, host_ws_.get(), host_in_.get(), host_counts_.data()});
  }
  if (mixed) {
    Backend& cpu = *options_.host_backend;
    host_weights_ = std::make_unique<ResidentWeights>(model, cpu, options_.ffn);
    // Their FFN reads the model's matrices, or the flash tier's caches (the split's store below).
    FfnStore* host_store = flash_;
    if (options_.ffn != FfnMode::Dense && flash_ == nullptr) {
      for (const LayerWeights& l : mw.layers)
        host_ram_layers_.push_back({l.ffn_gate, l.ffn_up, l.ffn_down_t});
      host_store_ = std::make_unique<RamFfnStore>(host_ram_layers_);
      host_store = host_store_.get();
    }
    host_ffn_ = std::make_unique<FfnExecutor>(model, *host_weights_, cpu, *host_ws_, *host_in_,
                                              host_store, options_.ffn, false);
  }
  counters_ =
      backend_.allocate(static_cast<uint64_t>(c_.n_layer) * sizeof(uint64_t), "the FFN's counters");
  counts_.assign(static_cast<size_t>(c_.n_layer), 0);
  if (!host && !options_.output_on_host)
    device_logits_ = backend_.allocate(
        static_cast<uint64_t>(kMaxBatch * c_.n_vocab) * sizeof(float), "the logits");
}

void Session::make_store() {
  const bool split = !options_.vram_neurons.empty();
  std::unique_ptr<FfnStore> held = model_.weights.bundled ? make_flash_store() : make_ram_store();
  if (!split) {
    store_ = std::move(held);
    return;
  }
  // The device part holds its copies of the hot rows, taken from the store below, which
  // serves the rest.
  below_ = std::move(held);
  auto s =
      std::make_unique<SplitFfnStore>(backend_, *below_, options_.vram_neurons, c_.n_ff, kMaxBatch);
  split_ = s.get();
  store_ = std::move(s);
}

std::unique_ptr<FfnStore> Session::make_ram_store() {
  // A split's RAM part reads the model's own matrices; otherwise the rows the backend holds.
  const bool split = !options_.vram_neurons.empty();
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    if (split) {
      const LayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
      ram_layers_.push_back({w.ffn_gate, w.ffn_up, w.ffn_down_t});
    } else {
      const ResidentLayer& r = weights_->layer(l);
      ram_layers_.push_back({r.ffn_gate, r.ffn_up, r.ffn_down_t});
    }
  }
  return std::make_unique<RamFfnStore>(ram_layers_);
}

std::unique_ptr<FfnStore> Session::make_flash_store() {
  const ModelWeights& mw = model_.weights;
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
  fo.split_reads = options_.split_reads && ffn_is_relu_family(c_.ffn);
  fo.pinned = options_.pinned;
  std::vector<uint64_t> offsets;
  for (const LayerWeights& l : mw.layers) offsets.push_back(l.bundles_offset);
  auto flash = std::make_unique<FlashFfnStore>(mw.bundle, c_.n_embd, std::move(offsets), *source,
                                               std::move(fo));
  flash_ = flash.get();
  return flash;
}

Session::~Session() {
  if (device_logits_.data != nullptr) backend_.release(device_logits_);
  backend_.release(counters_);
}

void Session::collect_counts() {
  // Once per pass: the counters come back with the logits' download and start again at 0.
  const uint64_t bytes = counts_.size() * sizeof(uint64_t);
  backend_.download(counts_.data(), counters_.data, bytes);
  for (size_t l = 0; l < counts_.size(); ++l) ffn_stats_[l].nonzero += counts_[l];
  std::fill(counts_.begin(), counts_.end(), 0);
  for (size_t l = 0; l < host_counts_.size(); ++l) ffn_stats_[l].nonzero += host_counts_[l];
  std::fill(host_counts_.begin(), host_counts_.end(), 0);
  backend_.upload(counters_.data, counts_.data(), bytes);
}

uint64_t Session::split_device_pairs() const {
  return split_ != nullptr ? split_->device_pairs() : 0;
}

uint64_t Session::split_ram_pairs() const {
  // The RAM part of split layers, and every activation of the layers on the CPU.
  uint64_t pairs = split_ != nullptr ? split_->ram_pairs() : 0;
  for (int64_t l = 0; l < c_.n_layer; ++l)
    if (on_cpu(l)) pairs += ffn_stats_[static_cast<size_t>(l)].computed;
  return pairs;
}

Session::SplitTraffic Session::split_traffic() const {
  SplitTraffic t;
  if (split_ == nullptr) return t;
  // Every layer has the same neuron row bytes in the models strata loads.
  const uint64_t row = split_->neuron_bytes(0);
  t.device_row_bytes = split_->device_rows_read() * row;
  t.ram_row_bytes = split_->ram_rows_read() * row;
  for (int64_t l = 0; l < c_.n_layer; ++l)  // the layers wholly on the CPU read all theirs there
    if (on_cpu(l)) t.ram_row_bytes += ffn_stats_[static_cast<size_t>(l)].rows_read * row;
  t.link_bytes = split_->link_bytes() + ffn_->link_bytes() + residual_link_bytes_;
  return t;
}

uint64_t Session::kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type) {
  return KvCache::bytes(c, n_ctx, k_type, v_type);
}

uint64_t Session::kv_cache_bytes() const {
  return kv_->bytes() + (host_kv_ != nullptr ? host_kv_->bytes() : 0);
}

bool Session::on_cpu(int64_t l) const {
  const auto i = static_cast<size_t>(l);
  return i < options_.host_layers.size() && options_.host_layers[i] != 0;
}

Session::Side Session::side(bool cpu) {
  if (cpu)
    return {*options_.host_backend,
            *host_ws_,
            *host_in_,
            *host_weights_,
            host_kv_ != nullptr ? *host_kv_ : *kv_,
            *host_ffn_,
            host_counts_.data()};
  return {
      backend_, *ws_, *in_, *weights_, *kv_, *ffn_, reinterpret_cast<uint64_t*>(counters_.data)};
}

void Session::move_residual(bool to_cpu, int64_t n) {
  if (to_cpu == residual_on_cpu_) return;
  const uint64_t bytes = static_cast<uint64_t>(n * c_.n_embd) * sizeof(float);
  if (to_cpu)
    backend_.download(host_ws_->x, ws_->x, bytes);
  else
    backend_.upload(ws_->x, host_ws_->x, bytes);
  residual_link_bytes_ += bytes;
  residual_on_cpu_ = to_cpu;
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
  if (options.ffn == FfnMode::GateFirst && !ffn_is_relu_family(model.config.ffn))
    fail("--ffn gate-first needs a ReLU-family FFN (reglu, drelu, relu); '{}' is {}",
         model.file->path(), ffn_activation_name(model.config.ffn));
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
  if (observer && backend_.device() != Device::Host)
    fail("FFN observers read activations on the host; profile without a GPU");
  observer_ = std::move(observer);
}

void Session::truncate(int seq, int64_t n) {
  int64_t& past = n_past_.at(static_cast<size_t>(seq));
  past = std::clamp<int64_t>(n, 0, past);
}

void Session::copy_sequence(int from, int to, int64_t n) {
  if (from == to || n_past(from) < n || n < 0)
    fail("cannot copy {} positions of sequence {}", n, from);
  kv_->copy_rows(from * n_ctx_, to * n_ctx_, n);
  if (host_kv_ != nullptr) host_kv_->copy_rows(from * n_ctx_, to * n_ctx_, n);
  n_past_.at(static_cast<size_t>(to)) = n;
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  one_seq_.clear();
  for (size_t i = 0; i < tokens.size(); ++i)
    one_seq_.push_back({tokens[i], 0, all_logits || i + 1 == tokens.size()});
  return decode(one_seq_);
}

void Session::check_batch(std::span<const BatchToken> batch) const {
  if (batch.empty()) fail("no tokens to evaluate");
  std::vector<int64_t> length = n_past_;
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= c_.n_vocab)
      fail("token id {} is outside the vocabulary (size {})", t.token, c_.n_vocab);
    if (t.seq < 0 || t.seq >= n_seq())
      fail("sequence {} is not one of the session's {}", t.seq, n_seq());
    if (++length[static_cast<size_t>(t.seq)] > n_ctx_)
      fail("context is full ({} tokens); use a larger -c", n_ctx_);
  }
}

std::span<const float> Session::decode(std::span<const BatchToken> batch) {
  check_batch(batch);
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t rows = 0;
  for (const BatchToken& t : batch) rows += t.logits ? 1 : 0;
  tokens_evaluated_ += static_cast<uint64_t>(n);
  logits_.resize(static_cast<size_t>(rows * c_.n_vocab));
  int64_t done_rows = 0;
  for (int64_t start = 0; start < n; start += kMaxBatch) {
    const auto part = batch.subspan(static_cast<size_t>(start),
                                    static_cast<size_t>(std::min(kMaxBatch, n - start)));
    forward(part, logits_.data() + done_rows * c_.n_vocab);
    for (const BatchToken& t : part) done_rows += t.logits ? 1 : 0;
  }
  return logits_;
}

void Session::place(std::span<const BatchToken> batch) {
  const int64_t n = static_cast<int64_t>(batch.size()), half = rope_half();
  pos_.resize(static_cast<size_t>(n));
  base_.resize(static_cast<size_t>(n));
  rope_host_.resize(static_cast<size_t>(2 * n * half));
  float* cos = rope_host_.data();
  float* sin = cos + n * half;
  for (int64_t b = 0; b < n; ++b) {
    const auto seq = static_cast<size_t>(batch[static_cast<size_t>(b)].seq);
    const int64_t pos = n_past_[seq]++;
    pos_[static_cast<size_t>(b)] = pos;
    base_[static_cast<size_t>(b)] = static_cast<int64_t>(seq) * n_ctx_;
    // Rotation angles for this position: theta_i = pos * base^(-2i / n_rot).
    for (int64_t i = 0; i < half; ++i) {
      const double theta = static_cast<double>(pos) *
                           std::pow(static_cast<double>(c_.rope_freq_base),
                                    -2.0 * static_cast<double>(i) / static_cast<double>(c_.n_rot));
      cos[b * half + i] = static_cast<float>(std::cos(theta));
      sin[b * half + i] = static_cast<float>(std::sin(theta));
    }
  }
  const uint64_t bytes = static_cast<uint64_t>(n * half) * sizeof(float);
  backend_.upload(ws_->rope_cos, cos, bytes);
  backend_.upload(ws_->rope_sin, sin, bytes);
  if (host_kv_ != nullptr) {  // layers on the CPU rotate with the same table
    options_.host_backend->upload(host_ws_->rope_cos, cos, bytes);
    options_.host_backend->upload(host_ws_->rope_sin, sin, bytes);
  }
}

void Session::embed(std::span<const BatchToken> batch) {
  for (size_t b = 0; b < batch.size(); ++b)
    backend_.dequantize_row(model_.weights.token_embd.type, embedding_->row(batch[b].token),
                            ws_->x + static_cast<int64_t>(b) * c_.n_embd, c_.n_embd);
  const MatrixView& positions = model_.weights.position_embd;
  if (positions.data == nullptr) return;
  // Learned positions (OPT): each token's row of the table, added to its embedding.
  const int64_t n = static_cast<int64_t>(batch.size());
  for (int64_t b = 0; b < n; ++b)
    backend_.dequantize_row(positions.type,
                            positions.row(pos_[static_cast<size_t>(b)] + c_.arch->position_offset),
                            ws_->proj + b * c_.n_embd, c_.n_embd);
  backend_.add(ws_->x, ws_->proj, n * c_.n_embd);
}

void Session::forward(std::span<const BatchToken> batch, float* logits) {
  const int64_t n = static_cast<int64_t>(batch.size());
  place(batch);
  embed(batch);
  // Look-ahead reads where the session's store reads flash itself (not below a device's part).
  const bool lookahead =
      store_ != nullptr && store_->can_prefetch() && options_.lookahead && n == 1;
  residual_on_cpu_ = false;  // the embedding rows are made on the session's device
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    const bool cpu = on_cpu(l);
    if (host_ws_ != nullptr) move_residual(cpu, n);
    Side s = side(cpu);
    layer(s, l, n);
    if (l == 0) ffn_activations_ += static_cast<uint64_t>(n * c_.n_ff);
    if (lookahead && l + 1 < c_.n_layer) {
      const Event ahead = backend_.record();
      ffn_->prefetch(l + 1, clock_ - 1);
      add_elapsed(backend_, ahead, times_.predictor, spans_);
    }
  }
  if (host_ws_ != nullptr) move_residual(options_.output_on_host, n);
  Backend& out = options_.output_on_host ? *options_.host_backend : backend_;
  const Event start = out.record();
  output(batch, logits);
  spans_.add(start, out.record(), &times_.output, 1, &out);
  backend_.synchronize();  // the logits are read by the caller
  spans_.resolve(backend_);
  collect_counts();
  clock_ += n;
}

void Session::output(std::span<const BatchToken> batch, float* logits) {
  // Only the marked tokens' logits: their rows normalized side by side, one product.
  // On a device they are made in its memory and downloaded; on the CPU (the plan's output head
  // there) straight into `logits`.
  Side s = side(options_.output_on_host);
  const MatrixView& out = s.weights.output();
  int64_t rows = 0;
  for (size_t b = 0; b < batch.size(); ++b)
    if (batch[b].logits)
      norm(s, s.ws.x + static_cast<int64_t>(b) * c_.n_embd, s.weights.output_norm(),
           s.weights.output_norm_bias(), s.ws.xn + rows++ * c_.n_embd, 1);
  if (rows == 0) return;
  float* y = device_logits_.data != nullptr && !options_.output_on_host
                 ? reinterpret_cast<float*>(device_logits_.data)
                 : logits;
  s.backend.prepare(s.in, s.ws.xn, c_.n_embd, rows, {out.type});
  const RowsJob job{&out, y, c_.n_vocab};
  s.backend.matmul(std::span(&job, 1), s.in);
  if (y != logits)
    backend_.download(logits, y, static_cast<uint64_t>(rows * c_.n_vocab) * sizeof(float));
}

}  // namespace strata
