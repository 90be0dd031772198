#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/attention.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "placement/plan.h"
#include "runtime/device_part.h"
#include "runtime/embedding_rows.h"
#include "runtime/ffn_executor.h"
#include "runtime/kv_cache.h"
#include "runtime/lora_products.h"
#include "runtime/resident_weights.h"
#include "runtime/workspace.h"
#include "tensor/soft_cap.h"
#include "tiers/flash_column_store.h"
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
WorkspaceShape workspace_shape(const Model& m, int64_t n_ctx, int64_t max_batch, FfnMode mode,
                               bool split = false, bool input_columns = false) {
  return WorkspaceShape::of(m.config, n_ctx, max_batch, mode, m.weights.bundled || split,
                            largest_predictor_rank(m.weights),
                            input_columns || m.weights.column_bundled);
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
      max_batch_(options.max_batch > 0 ? options.max_batch : kMaxBatch),
      options_(std::move(options)) {
  if (n_ctx <= 0) fail("context size must be positive, got {}", n_ctx);
  if (max_batch_ > kMaxUbatch)
    fail("a batch of {} tokens is more than the {} a session takes", max_batch_, kMaxUbatch);
  if (max_batch_ > kMaxBatch && backend_.device() != Device::Host)
    fail("batches of more than {} tokens are for the CPU alone, not {}", kMaxBatch,
         backend_.name());
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
  check_layout();
  check_lora();
  check_weight_types();
  sparsifier_ =
      std::make_unique<InputSparsifier>(model, options_.sparsity.mode, options_.sparsity.level);
  // On a device the copies are uploaded with its layers (its axpy reads float copies and column
  // groups alike); layers on the CPU beside it read the model's.
  columns_made_ = options_.sparsity.mode == SparsityMode::Teal && !model.columns.empty();
  make_parts();
  // Look-ahead where the session's store reads flash itself (not below a device's part); not
  // for a mixture: the next layer's experts are the router's to choose, on an input that does
  // not exist yet.
  if (options_.flash.lookahead && flash_ != nullptr && split_ == nullptr && !c_.moe() &&
      options_.ffn == FfnMode::Predict)
    parts_[0]->ffn->set_lookahead(true, max_batch_);
  embedding_ = std::make_unique<EmbeddingRows>(model);
  ffn_stats_.assign(static_cast<size_t>(c_.n_layer), {});
  if (backend_.device() != Device::Host && !options_.output_on_host)
    device_logits_ = backend_.allocate(
        static_cast<uint64_t>(max_batch_ * c_.n_vocab) * sizeof(float), "the logits");
}

void Session::make_parts() {
  const bool host = backend_.device() == Device::Host;
  const bool split = !options_.vram_neurons.empty();
  int64_t cpu_layers = 0;
  for (uint8_t h : options_.host_layers) cpu_layers += h != 0;
  const bool mixed = cpu_layers > 0 || options_.output_on_host;
  const WorkspaceShape shape =
      workspace_shape(model_, n_ctx_, max_batch_, options_.ffn, split, columns_made_);
  PartLayout layout;
  layout.kv_positions = n_ctx_ * options_.n_seq;
  layout.k_type = options_.kv.k;
  layout.v_type = options_.kv.v;
  for (int64_t l = 0; l < c_.n_layer; ++l) {
    layer_part_.push_back(on_cpu(l) ? 1 : 0);
    layout.layers.push_back(on_cpu(l) ? 0 : 1);
  }
  layout.output = !options_.output_on_host;
  layout.columns = columns_made_;
  // A split FFN's device holds only its hot rows (the split store copies them); a dense
  // mixture's, its own experts.
  layout.ffn_rows = !split || experts_split();
  if (experts_split()) layout.experts_held = experts_held();
  parts_.push_back(
      std::make_unique<DevicePart>(model_, backend_, options_.ffn, layout, shape, max_batch_));
  if ((split || mixed) && !host) {
    // The CPU beside the device: the plan's layers and output head, or only a split's RAM part.
    for (uint8_t& here : layout.layers) here = here != 0 ? 0 : 1;
    layout.output = options_.output_on_host;
    layout.ffn_rows = true;
    layout.experts_held.clear();
    parts_.push_back(std::make_unique<DevicePart>(model_, *options_.host_backend, options_.ffn,
                                                  layout, shape, max_batch_));
  }
  output_part_ = options_.output_on_host ? 1 : 0;
  FfnStore* store = options_.ffn != FfnMode::Dense ? make_stores() : nullptr;
  DevicePart& device = *parts_[0];
  device.make_ffn(store, options_.check_predictor);
  if (model_.weights.column_bundled) {
    flash_columns_ = make_column_store();
    device.ffn->set_flash_columns(flash_columns_.get());
  }
  if (columns_made_ || flash_columns_ != nullptr)
    device.columns = std::make_unique<ColumnProducts>(backend_, device.ws, *sparsifier_,
                                                      device.sparsity_counters(0),
                                                      DevicePart::kCountersPerLayer);
  device.ffn->set_sparsifier(sparsifier_.get(), device.sparsity_counters(0),
                             DevicePart::kCountersPerLayer, device.columns.get());
  if (!model_.lora.empty()) {
    lora_ = std::make_unique<LoraProducts>(model_.lora, backend_, max_batch_);
    device.ffn->set_lora(lora_.get());
  }
  if (DevicePart* cpu = cpu_part()) {
    if (split)
      device.ffn->set_host_side(
          {&cpu->backend, &cpu->ws, cpu->in.get(), cpu->counter(0), DevicePart::kCountersPerLayer});
    // Its layers' FFN reads the model's matrices, or the flash tier's caches (the split's below).
    FfnStore* cpu_store = options_.ffn == FfnMode::Dense ? nullptr
                          : flash_                       ? flash_.get()
                                                         : &cpu->ram_store();
    if (mixed) {
      cpu->make_ffn(cpu_store, false);
      if (columns_made_)
        cpu->columns = std::make_unique<ColumnProducts>(cpu->backend, cpu->ws, *sparsifier_,
                                                        cpu->sparsity_counters(0),
                                                        DevicePart::kCountersPerLayer);
      cpu->ffn->set_sparsifier(sparsifier_.get(), cpu->sparsity_counters(0),
                               DevicePart::kCountersPerLayer, cpu->columns.get());
    }
  }
}

Session::~Session() {
  if (device_logits_.data != nullptr) backend_.release(device_logits_);
}

bool Session::experts_split() const {
  return c_.moe() && options_.ffn == FfnMode::Dense && !options_.vram_neurons.empty();
}

std::vector<std::vector<uint8_t>> Session::experts_held() const {
  std::vector<std::vector<uint8_t>> held;
  const int64_t neurons = c_.ffn_neurons();
  for (size_t l = 0; l < options_.vram_neurons.size(); ++l) {
    const std::vector<int32_t>& ids = options_.vram_neurons[l];
    for (size_t k = 0; k < ids.size(); ++k)
      if (ids[k] < 0 || ids[k] >= neurons || (k > 0 && ids[k] <= ids[k - 1]))
        fail("layer {}'s VRAM neurons are not ascending ids below {}", l, neurons);
    held.push_back(whole_experts(ids, c_.n_ff, neurons, static_cast<int64_t>(l)));
  }
  return held;
}

uint64_t Session::split_device_pairs() const {
  if (experts_split()) return parts_[0]->ffn->expert_split().device_pairs;
  return split_ != nullptr ? split_->device_pairs() : 0;
}

uint64_t Session::split_ram_pairs() const {
  if (experts_split()) return parts_[0]->ffn->expert_split().host_pairs;
  // The RAM part of split layers, and every activation of the layers on the CPU.
  uint64_t pairs = split_ != nullptr ? split_->ram_pairs() : 0;
  for (int64_t l = 0; l < c_.n_layer; ++l)
    if (on_cpu(l)) pairs += ffn_stats_[static_cast<size_t>(l)].computed;
  return pairs;
}

Session::SplitTraffic Session::split_traffic() const {
  SplitTraffic t;
  if (experts_split()) {
    // One expert neuron's gate, up and down weights: every expert is the same size.
    const LayerWeights& l0 = model_.weights.layers[0];
    const uint64_t row = expert_bytes(l0) / static_cast<uint64_t>(c_.n_expert * c_.n_ff);
    const FfnExecutor::ExpertSplitCounts& e = parts_[0]->ffn->expert_split();
    t.device_row_bytes = e.device_rows * row;
    t.ram_row_bytes = e.host_rows * row;
    t.link_bytes = parts_[0]->ffn->link_bytes() + residual_link_bytes_;
    return t;
  }
  if (split_ == nullptr) return t;
  // Every layer has the same neuron row bytes in the models strata loads.
  const uint64_t row = split_->neuron_bytes(0);
  t.device_row_bytes = split_->device_rows_read() * row;
  t.ram_row_bytes = split_->ram_rows_read() * row;
  for (int64_t l = 0; l < c_.n_layer; ++l)  // the layers wholly on the CPU read all theirs there
    if (on_cpu(l)) t.ram_row_bytes += ffn_stats_[static_cast<size_t>(l)].rows_read * row;
  t.link_bytes = split_->link_bytes() + parts_[0]->ffn->link_bytes() + residual_link_bytes_;
  return t;
}

uint64_t Session::kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, DType k_type, DType v_type) {
  return KvCache::bytes(c, n_ctx, k_type, v_type);
}

uint64_t Session::kv_cache_bytes() const {
  uint64_t bytes = 0;
  for (const auto& p : parts_) bytes += p->kv_bytes();
  return bytes;
}

bool Session::on_cpu(int64_t l) const {
  const auto i = static_cast<size_t>(l);
  return i < options_.host_layers.size() && options_.host_layers[i] != 0;
}

void Session::move_residual(size_t to, int64_t n) {
  if (to == residual_part_) return;
  DevicePart& from = *parts_[residual_part_];
  DevicePart& dst = *parts_[to];
  const uint64_t bytes = static_cast<uint64_t>(n * c_.n_embd) * sizeof(float);
  // One of the two is the host: the other's backend moves the rows.
  if (dst.backend.device() == Device::Host)
    from.backend.download(dst.ws.x, from.ws.x, bytes);
  else
    dst.backend.upload(dst.ws.x, from.ws.x, bytes);
  residual_link_bytes_ += bytes;
  residual_part_ = to;
}

uint64_t Session::workspace_bytes(const Model& model, int64_t n_ctx, FfnMode mode,
                                  bool input_columns, bool on_cpu, int64_t max_batch) {
  WorkspaceShape shape = workspace_shape(model, n_ctx, max_batch > 0 ? max_batch : kMaxBatch,
                                         mode, false, input_columns);
  shape.attention_scores = !on_cpu;
  return Workspace::bytes(shape);
}

bool Session::use_columns(int64_t n) const {
  return use_input_columns(sparsifier_->mode(), columns_made_, n);
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
  if (flash_columns_ != nullptr) return flash_columns_->stats();
  return flash_ != nullptr ? flash_->stats() : NeuronCacheStats{};
}

void Session::set_selection_observer(SelectionObserver observer) {
  if (options_.ffn == FfnMode::Dense) fail("selection observers need a sparse FFN mode");
  if (backend_.device() != Device::Host || cpu_part() != nullptr)
    fail("selection observers read the selection on the host; profile without a GPU");
  parts_[0]->ffn->set_selection_observer(std::move(observer));
}

void Session::set_timeline(Timeline* timeline) {
  if (timeline != nullptr && (backend_.device() != Device::Host || cpu_part() != nullptr))
    fail("the timeline records runs the CPU computes alone; run without a GPU");
  timeline_ = timeline;
  parts_[0]->ffn->set_timeline(timeline);
  if (flash_) flash_->set_timeline(timeline);
}

void Session::set_ffn_observer(FfnObserver observer) {
  if (observer && options_.ffn != FfnMode::Dense)
    fail("FFN observers need the dense FFN (they see every activation)");
  if (observer && backend_.device() != Device::Host)
    fail("FFN observers read activations on the host; profile without a GPU");
  observer_ = std::move(observer);
}

void Session::set_input_observer(InputObserver observer) {
  if (observer && backend_.device() != Device::Host)
    fail("input observers read values on the host; calibrate without a GPU");
  sparsifier_->set_observer(std::move(observer));
}

void Session::replay_layer(int64_t l, float* x, int64_t n, int64_t pos0) {
  if (n < 1 || n > max_batch_ || pos0 < 0 || pos0 + n > n_ctx_ || l < 0 || l >= c_.n_layer)
    fail("replay_layer: {} tokens at position {} of layer {} do not fit the session", n, pos0, l);
  if (parts_.size() > 1 || backend_.device() != Device::Host)
    fail("replay_layer runs on the CPU backend alone");
  one_seq_.assign(static_cast<size_t>(n), BatchToken{});
  n_past_[0] = pos0;
  place(one_seq_);
  DevicePart& p = *parts_[0];
  const uint64_t bytes = static_cast<uint64_t>(n * c_.n_embd) * sizeof(float);
  std::memcpy(p.ws.x, x, bytes);
  layer(p, l, n);
  std::memcpy(x, p.ws.x, bytes);
  spans_.resolve(backend_);
  p.collect_counts(ffn_stats_, *sparsifier_);
}

void Session::embed_tokens(std::span<const int32_t> tokens, int64_t pos0, float* out) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 1 || n > max_batch_ || pos0 < 0 || pos0 + n > n_ctx_)
    fail("embed_tokens: {} tokens at position {} do not fit the session", n, pos0);
  if (backend_.device() != Device::Host) fail("embed_tokens runs on the CPU backend");
  one_seq_.clear();
  for (const int32_t t : tokens) one_seq_.push_back({t, 0, false});
  n_past_[0] = pos0;
  check_batch(one_seq_);
  place(one_seq_);
  embed(one_seq_);
  std::memcpy(out, parts_[0]->ws.x, static_cast<size_t>(n * c_.n_embd) * sizeof(float));
}

void Session::truncate(int seq, int64_t n) {
  int64_t& past = n_past_.at(static_cast<size_t>(seq));
  past = std::clamp<int64_t>(n, 0, past);
}

void Session::copy_sequence(int from, int to, int64_t n) {
  if (from == to || n_past(from) < n || n < 0)
    fail("cannot copy {} positions of sequence {}", n, from);
  for (auto& p : parts_) p->copy_kv_rows(from * n_ctx_, to * n_ctx_, n);
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
  int64_t rows = 0, hidden_rows = 0;
  for (const BatchToken& t : batch) {
    rows += t.logits ? 1 : 0;
    hidden_rows += t.hidden ? 1 : 0;
  }
  tokens_evaluated_ += static_cast<uint64_t>(n);
  logits_.resize(static_cast<size_t>(rows * c_.n_vocab));
  hidden_.resize(static_cast<size_t>(hidden_rows * c_.n_embd));
  int64_t done_rows = 0, done_hidden = 0;
  for (int64_t start = 0; start < n; start += max_batch_) {
    const auto part = batch.subspan(static_cast<size_t>(start),
                                    static_cast<size_t>(std::min(max_batch_, n - start)));
    forward(part, logits_.data() + done_rows * c_.n_vocab,
            hidden_.data() + done_hidden * c_.n_embd);
    for (const BatchToken& t : part) {
      done_rows += t.logits ? 1 : 0;
      done_hidden += t.hidden ? 1 : 0;
    }
  }
  return logits_;
}

void Session::place(std::span<const BatchToken> batch) {
  const int64_t n = static_cast<int64_t>(batch.size()), half = rope_half();
  const int64_t tables = c_.swa_rope_differs() ? 2 : 1;
  pos_.resize(static_cast<size_t>(n));
  base_.resize(static_cast<size_t>(n));
  seen_pos_.resize(static_cast<size_t>(n));
  seen_base_.resize(static_cast<size_t>(n));
  rope_host_.resize(static_cast<size_t>(2 * tables * n * half));
  float* cos = rope_host_.data();
  float* sin = cos + tables * n * half;
  const RopeParams rope{c_.n_rot, c_.rope_freq_base, c_.rope_scaling,
                        model_.weights.rope_divisors(n_ctx_, c_.rope_scaling.n_ctx_orig)};
  RopeParams swa_rope = rope;  // the windowed layers' own (Gemma 3's local layers)
  if (c_.rope_freq_base_swa > 0.0f) swa_rope.freq_base = c_.rope_freq_base_swa;
  if (c_.rope_freq_scale_swa > 0.0f) swa_rope.scaling.freq_scale = c_.rope_freq_scale_swa;
  for (int64_t b = 0; b < n; ++b) {
    const auto seq = static_cast<size_t>(batch[static_cast<size_t>(b)].seq);
    const int64_t pos = n_past_[seq]++;
    pos_[static_cast<size_t>(b)] = pos;
    base_[static_cast<size_t>(b)] = static_cast<int64_t>(seq) * n_ctx_;
    // A sliding window: the positions attended start `first` rows into the sequence's cache.
    const int64_t first =
        c_.sliding_window > 0 ? std::max<int64_t>(0, pos + 1 - c_.sliding_window) : 0;
    seen_pos_[static_cast<size_t>(b)] = pos - first;
    seen_base_[static_cast<size_t>(b)] = base_[static_cast<size_t>(b)] + first;
    if (half > 0) rope_angles(rope, pos, cos + b * half, sin + b * half);
    if (half > 0 && tables == 2)
      rope_angles(swa_rope, pos, cos + (n + b) * half, sin + (n + b) * half);
  }
  const uint64_t bytes = static_cast<uint64_t>(tables * n * half) * sizeof(float);
  for (auto& p : parts_) {  // layers on the CPU rotate with the same table
    p->backend.upload(p->ws.rope_cos, cos, bytes);
    p->backend.upload(p->ws.rope_sin, sin, bytes);
  }
}

void Session::embed(std::span<const BatchToken> batch) {
  Workspace& ws = parts_[0]->ws;  // the embedding rows are made on the session's device
  for (size_t b = 0; b < batch.size(); ++b)
    backend_.dequantize_row(model_.weights.token_embd.type, embedding_->row(batch[b].token),
                            ws.x + static_cast<int64_t>(b) * c_.n_embd, c_.n_embd);
  if (c_.arch->scale_embedding)  // Gemma: sqrt(n_embd) in f32, as llama.cpp's graph
    backend_.scale(ws.x, std::sqrt(static_cast<float>(c_.n_embd)),
                   static_cast<int64_t>(batch.size()) * c_.n_embd);
  const MatrixView& positions = model_.weights.position_embd;
  if (positions.data == nullptr) return;
  // Learned positions (OPT): each token's row of the table, added to its embedding.
  const int64_t n = static_cast<int64_t>(batch.size());
  for (int64_t b = 0; b < n; ++b)
    backend_.dequantize_row(positions.type,
                            positions.row(pos_[static_cast<size_t>(b)] + c_.arch->position_offset),
                            ws.proj + b * c_.n_embd, c_.n_embd);
  backend_.add(ws.x, ws.proj, n * c_.n_embd);
}

void Session::forward(std::span<const BatchToken> batch, float* logits, float* hidden) {
  const int64_t n = static_cast<int64_t>(batch.size());
  if (timeline_ != nullptr) timeline_->begin_token();
  place(batch);
  embed(batch);
  residual_part_ = 0;
  const int64_t layers =
      options_.exit_layer > 0 ? std::min(options_.exit_layer, c_.n_layer) : c_.n_layer;
  for (int64_t l = 0; l < layers; ++l) {
    move_residual(layer_part_[static_cast<size_t>(l)], n);
    layer(part_of(l), l, n);
    if (l == 0)  // a token's: its k experts' neurons and a shared expert's
      ffn_activations_ += static_cast<uint64_t>(
          n * (c_.n_ff * std::max<int64_t>(1, c_.n_expert_used) + c_.n_ff_shared));
  }
  move_residual(output_part_, n);
  Backend& out = output_part().backend;
  const double mark = timeline_now(timeline_);
  const Event start = out.record();
  output(batch, logits, hidden);
  spans_.add(start, out.record(), &times_.output, 1, &out);
  backend_.synchronize();  // the logits are read by the caller
  if (c_.final_softcap > 0.0f) {  // Gemma 2: the logits read back, capped on the host
    int64_t rows = 0;
    for (const BatchToken& t : batch) rows += t.logits ? 1 : 0;
    soft_cap_all(logits, rows * c_.n_vocab, c_.final_softcap);
  }
  timeline_span(timeline_, TimelinePart::Output, c_.n_layer, mark);
  spans_.resolve(backend_);
  for (auto& p : parts_) p->collect_counts(ffn_stats_, *sparsifier_);
  clock_ += n;
  if (timeline_ != nullptr) timeline_->end_token();
}

void Session::output(std::span<const BatchToken> batch, float* logits, float* hidden) {
  // Only the marked tokens' logits: their rows normalized side by side, one product.
  // On a device they are made in its memory and downloaded; on the CPU (the plan's output head
  // there) straight into `logits`. Hidden states first: the normalized rows, downloaded.
  DevicePart& p = output_part();
  const MatrixView& out = p.weights->output();
  int64_t rows = 0;
  for (size_t b = 0; b < batch.size(); ++b)
    if (batch[b].hidden)
      norm(p.backend, p.ws.x + static_cast<int64_t>(b) * c_.n_embd, p.weights->output_norm(),
           p.weights->output_norm_bias(), p.ws.xn + rows++ * c_.n_embd, 1);
  if (rows > 0)
    p.backend.download(hidden, p.ws.xn, static_cast<uint64_t>(rows * c_.n_embd) * sizeof(float));
  rows = 0;
  for (size_t b = 0; b < batch.size(); ++b)
    if (batch[b].logits)
      norm(p.backend, p.ws.x + static_cast<int64_t>(b) * c_.n_embd, p.weights->output_norm(),
           p.weights->output_norm_bias(), p.ws.xn + rows++ * c_.n_embd, 1);
  if (rows == 0) return;
  float* y =
      device_logits_.data != nullptr ? reinterpret_cast<float*>(device_logits_.data) : logits;
  p.backend.prepare(*p.in, p.ws.xn, c_.n_embd, rows, {out.type});
  const RowsJob job{&out, y, c_.n_vocab};
  p.backend.matmul(std::span(&job, 1), *p.in);
  if (lora_ != nullptr) lora_->add(lora_->output(), p.ws.xn, rows, y, c_.n_vocab);
  if (const float* bias = p.weights->output_bias()) p.backend.add_bias(y, bias, rows, c_.n_vocab);
  if (y != logits)
    backend_.download(logits, y, static_cast<uint64_t>(rows * c_.n_vocab) * sizeof(float));
}

}  // namespace strata
