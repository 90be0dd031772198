#include "runtime/ffn_executor.h"

#include <numeric>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/timer.h"
#include "runtime/lora_products.h"

namespace strata {

FfnExecutor::FfnExecutor(const Model& model, const ResidentWeights& weights, Backend& backend,
                         Workspace& ws, PreparedRows& in, FfnStore* store, FfnMode mode,
                         bool check_predictor)
    : model_(model),
      weights_(weights),
      c_(model.config),
      backend_(backend),
      ws_(ws),
      in_(in),
      store_(store),
      mode_(mode),
      check_predictor_(check_predictor) {
  bool down_t_only = false;
  for (int64_t l = 0; l < c_.n_layer && !c_.moe(); ++l)
    down_t_only |= weights_.layer(l).ffn_down.data == nullptr;
  if (mode_ == FfnMode::Dense && down_t_only) {
    std::vector<int32_t> ids(static_cast<size_t>(c_.n_ff));
    std::iota(ids.begin(), ids.end(), 0);
    all_ids_ = backend_.allocate(ids.size() * sizeof(int32_t), "the FFN's neuron ids");
    backend_.upload(all_ids_.data, ids.data(), all_ids_.bytes);
  }
}

FfnExecutor::~FfnExecutor() {
  if (all_ids_.data != nullptr) backend_.release(all_ids_);
}

void FfnExecutor::run(int64_t l, int64_t n, int64_t token, FfnLayerStats& stats, uint64_t* nonzero,
                      ForwardTimes& times, TimeSpans& spans, const FfnObserver& observer) {
  const double start = timeline_now(timeline_);
  if (c_.moe() && mode_ == FfnMode::Dense)
    mixture(l, n, stats, nonzero, times, spans, observer);
  else if (mode_ == FfnMode::Dense)
    dense(l, n, token, stats, nonzero, observer);
  else
    sparse(l, n, token, stats, nonzero, times, spans);  // records its own parts
  if (mode_ == FfnMode::Dense) timeline_span(timeline_, TimelinePart::Ffn, l, start);
}

void FfnExecutor::dense(int64_t l, int64_t n, int64_t token, FfnLayerStats& stats,
                        uint64_t* nonzero, const FfnObserver& observer) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t ff = c_.n_ff, total = n * ff;
  const bool gated = ffn_has_gate(c_.ffn);
  uint64_t* sparsity = sparsity_counters_ + l * sparsity_stride_;
  // The layer's column copies in this backend's memory (a column-bundled model's FFN has none:
  // it reads flash).
  const bool columns = use_input_columns(sparsifier_->mode(), columns_ != nullptr, n);
  const LayerColumns* cols = columns ? &w.columns : nullptr;
  gate_up_products(l, n, token, cols);
  if (const float* b = w.vec(LayerVector::FfnUpBias)) backend_.add_bias(ws_.up, b, n, ff);
  if (const float* b = w.vec(LayerVector::FfnGateBias); b != nullptr && gated)
    backend_.add_bias(ws_.gate, b, n, ff);
  if (gated) sparsifier_->apply(backend_, l, kGatePoint, ws_.gate, n, sparsity, c_.ffn);
  float* h = ws_.up;
  backend_.activation(c_.ffn, ws_.gate, ws_.up, h, total);
  stats.computed += static_cast<uint64_t>(total);
  backend_.keep_needed(h, nullptr, n, ff, 0, ff, nonzero);
  if (observer) observer(l, n, ws_.x, h);
  down_products(l, n, token, cols, h);
  add_down_bias(w, n);
}

void FfnExecutor::gate_up_products(int64_t l, int64_t n, int64_t token, const LayerColumns* cols) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t ff = c_.n_ff;
  const bool gated = ffn_has_gate(c_.ffn);
  const int ffn_point = static_cast<int>(MatrixInput::Ffn);
  const ColumnProducts::Part both[2] = {{ws_.gate, ff}, {ws_.up, ff}};
  const auto parts = gated ? std::span(both, 2) : std::span(both + 1, 1);
  if (flash_columns_ != nullptr) {
    const ColumnProducts::FlashColumns flash{flash_columns_, FlashColumnStore::Part::GateUp, token};
    columns_->run_fused(l, ffn_point, ws_.xn, n, c_.n_embd, flash, parts);
  } else if (cols != nullptr && cols->ffn(gated)) {
    if (gated && cols->ffn_gate_up.data != nullptr) {
      columns_->run_fused(l, ffn_point, ws_.xn, n, c_.n_embd, cols->ffn_gate_up, parts);
    } else {
      const ColumnProducts::Job jobs[2] = {{&cols->ffn_gate, ws_.gate, ff},
                                           {&cols->ffn_up, ws_.up, ff}};
      columns_->run(l, ffn_point, ws_.xn, n, c_.n_embd,
                    gated ? std::span(jobs, 2) : std::span(jobs + 1, 1));
    }
  } else {
    sparsifier_->apply(backend_, l, ffn_point, ws_.xn, n,
                       sparsity_counters_ + l * sparsity_stride_);
    backend_.prepare(in_, ws_.xn, c_.n_embd, n,
                     {w.ffn_up.type, gated ? w.ffn_gate.type : w.ffn_up.type});
    const RowsJob jobs[2] = {{&w.ffn_gate, ws_.gate, ff}, {&w.ffn_up, ws_.up, ff}};
    backend_.matmul(gated ? std::span(jobs, 2) : std::span(jobs + 1, 1), in_);
    if (lora_ != nullptr) {
      if (gated) lora_->add(lora_->find(l, LayerMatrix::FfnGate), ws_.xn, n, ws_.gate, ff);
      lora_->add(lora_->find(l, LayerMatrix::FfnUp), ws_.xn, n, ws_.up, ff);
    }
  }
}

void FfnExecutor::down_products(int64_t l, int64_t n, int64_t token, const LayerColumns* cols,
                                float* h) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t ff = c_.n_ff;
  const int hidden_point = static_cast<int>(MatrixInput::FfnHidden);
  if (flash_columns_ != nullptr) {
    const ColumnProducts::FlashColumns flash{flash_columns_, FlashColumnStore::Part::Down, token};
    const ColumnProducts::Job down{nullptr, ws_.proj, c_.n_embd, &flash};
    columns_->run(l, hidden_point, h, n, ff, std::span(&down, 1));
    return;
  }
  if (cols != nullptr && cols->ffn_down.data != nullptr) {
    const ColumnProducts::Job down{&cols->ffn_down, ws_.proj, c_.n_embd};
    columns_->run(l, hidden_point, h, n, ff, std::span(&down, 1));
    return;
  }
  sparsifier_->apply(backend_, l, hidden_point, h, n, sparsity_counters_ + l * sparsity_stride_);
  if (w.ffn_down.data != nullptr) {
    backend_.prepare(in_, h, ff, n, {w.ffn_down.type});
    const RowsJob down{&w.ffn_down, ws_.proj, c_.n_embd};
    backend_.matmul(std::span(&down, 1), in_);
  } else {
    // Only ffn_down_t in the file (PowerInfer): every neuron through the axpy.
    const std::span<const int32_t> all(reinterpret_cast<const int32_t*>(all_ids_.data),
                                       static_cast<size_t>(ff));
    backend_.axpy(w.ffn_down_t, all, h, ff, n, ws_.proj, c_.n_embd, {}, ff);
  }
  if (lora_ != nullptr)
    lora_->add(lora_->find(l, LayerMatrix::FfnDown), h, n, ws_.proj, c_.n_embd);
}

void FfnExecutor::add_down_bias(const ResidentLayer& w, int64_t n) {
  if (const float* b = w.vec(LayerVector::FfnDownBias))
    backend_.add_bias(ws_.proj, b, n, c_.n_embd);
}

void FfnExecutor::predict(int64_t l, int64_t n, PreparedRows& in, float* hidden, float* scores,
                          uint8_t* mask) {
  const LayerPredictor& p = weights_.layer(l).predictor;
  const int64_t rank = p.rank(), ff = c_.ffn_neurons();
  // The predictor reads the residual stream before ffn_norm, as PowerInfer's do.
  backend_.prepare(in, ws_.x, c_.n_embd, n, {p.fc1.type});
  const RowsJob fc1{&p.fc1, hidden, rank};
  backend_.matmul(std::span(&fc1, 1), in);
  backend_.relu(hidden, n * rank);
  backend_.prepare(in, hidden, rank, n, {p.fc2.type});
  const RowsJob fc2{&p.fc2, scores, ff};
  if (c_.moe())
    chosen_expert_rows(p.fc2, scores);  // the chosen experts' neurons only
  else
    backend_.matmul(std::span(&fc2, 1), in);
  backend_.threshold(scores, p.threshold, false, mask, n * ff);
}

uint64_t FfnExecutor::lookahead_bytes(const Model& model, int64_t rows) {
  const ModelConfig& c = model.config;
  int64_t rank = 1;
  bool float_predictor = false;
  for (const LayerWeights& l : model.weights.layers) {
    rank = std::max(rank, l.predictor.rank());
    float_predictor |= l.predictor.present() && (is_float_type(l.predictor.fc1.type) ||
                                                 is_float_type(l.predictor.fc2.type));
  }
  const auto ff = static_cast<uint64_t>(c.ffn_neurons());
  const auto n = static_cast<uint64_t>(rows);
  // The predictor's input (prepared as the CPU backend does), hidden values, scores, mask and
  // need per row, and the union's ids.
  return CpuBackend::scratch_bytes(rows, std::max<int64_t>(c.n_embd, rank), 0, 0, 1,
                                   float_predictor) +
         n * static_cast<uint64_t>(rank) * sizeof(float) + n * ff * (sizeof(float) + 2) +
         ff * sizeof(int32_t);
}

void FfnExecutor::set_lookahead(bool on, int64_t rows) {
  if (!on) {
    ahead_.reset();
    return;
  }
  if (backend_.device() != Device::Host || c_.moe() || mode_ != FfnMode::Predict ||
      store_ == nullptr || !store_->can_prefetch())
    fail(
        "look-ahead reads a flash tier's predicted neurons for the CPU (predict mode, no "
        "mixture)");
  int64_t rank = 1;
  for (int64_t l = 0; l < c_.n_layer; ++l)
    rank = std::max(rank, weights_.layer(l).predictor.rank());
  const auto ff = static_cast<size_t>(c_.ffn_neurons());
  const auto n = static_cast<size_t>(rows);
  ahead_ = std::make_unique<LookAhead>();
  ahead_->rows = rows;
  ahead_->in = backend_.make_prepared(rows);
  ahead_->hidden.resize(static_cast<size_t>(rank) * n);
  ahead_->scores.resize(ff * n);
  ahead_->mask.resize(ff * n);
  ahead_->need.resize(ff * n);
  ahead_->ids.resize(ff);
}

void FfnExecutor::chosen_expert_rows(const MatrixView& m, float* y) {
  const int64_t ff = c_.n_ff;
  expert_views_.clear();
  for (const int32_t e : chosen_experts_) expert_views_.push_back(row_view(m, e * ff, ff));
  expert_jobs_.clear();
  for (size_t i = 0; i < chosen_experts_.size(); ++i)
    expert_jobs_.push_back({&expert_views_[i], y + chosen_experts_[i] * ff, c_.ffn_neurons()});
  backend_.matmul(expert_jobs_, in_);
}

void FfnExecutor::gate_first(int64_t l, int64_t n) {
  // The gate (the up projection for plain ReLU) densely; it decides the rest. Of a mixture,
  // the chosen experts' rows only: the router's choice is the first selection.
  const ResidentLayer& w = weights_.layer(l);
  const bool gated = ffn_has_gate(c_.ffn);
  const int64_t neurons = c_.ffn_neurons();
  const MatrixView& deciding = gated ? w.ffn_gate : w.ffn_up;
  float* y = gated ? ws_.gate : ws_.up;
  if (c_.moe()) {
    chosen_expert_rows(deciding, y);
  } else {
    const RowsJob first{&deciding, y, neurons};
    backend_.matmul(std::span(&first, 1), in_);
    if (lora_ != nullptr)
      lora_->add(lora_->find(l, gated ? LayerMatrix::FfnGate : LayerMatrix::FfnUp), ws_.xn, n, y,
                 neurons);
  }
  if (const float* b = w.vec(LayerVector::FfnUpBias); b != nullptr && !gated)
    backend_.add_bias(ws_.up, b, n, neurons);
  backend_.threshold(y, 0.0f, true, ws_.mask, n * neurons);
}

void FfnExecutor::prefetch(int64_t l, int64_t n, int64_t token) {
  LookAhead& a = *ahead_;
  predict(l, n, *a.in, a.hidden.data(), a.scores.data(), a.mask.data());
  uint64_t selected = 0;
  const int64_t n_ids = backend_.select_union(a.mask.data(), n, c_.ffn_neurons(), a.ids.data(),
                                              a.need.data(), &selected);
  store_->prefetch(l, std::span<const int32_t>(a.ids.data(), static_cast<size_t>(n_ids)), token);
}

void FfnExecutor::sparse(int64_t l, int64_t n, int64_t token, FfnLayerStats& stats,
                         uint64_t* nonzero, ForwardTimes& times, TimeSpans& spans) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t ff = c_.ffn_neurons();
  if (c_.moe()) route_to_neurons(l, n);  // the first selection, before the predictor's
  double mark = timeline_now(timeline_);
  if (mode_ == FfnMode::Predict) {
    const Event start = backend_.record();
    predict(l, n);
    const Event end = backend_.record();
    spans.add(start, end, &times.predictor, 1, &backend_);
    spans.add(start, end, &times.ffn, -1, &backend_);
    mark = timeline_span(timeline_, TimelinePart::Predictor, l, mark);
  }
  const FfnStore::RowTypes rows = store_->row_types(l);
  backend_.prepare(in_, ws_.xn, c_.n_embd, n,
                   {rows.up, ffn_has_gate(c_.ffn) ? rows.gate : rows.up});
  if (mode_ == FfnMode::GateFirst) gate_first(l, n);
  if (c_.moe()) backend_.mask_unchosen(ws_.mask, ws_.expert_weights, n, ff, c_.n_ff, c_.n_expert);
  if (selection_) selection_(l, n, ff, ws_.mask);  // host memory (Session checks)
  uint64_t selected = 0;
  NeuronList list{ws_.ids, 0, ws_.need, ff, n};
  list.count = backend_.select_union(ws_.mask, n, ff, ws_.ids, ws_.need, &selected);
  stats.computed += selected;
  stats.rows_read += static_cast<uint64_t>(list.count);
  timeline_span(timeline_, TimelinePart::Selection, l, mark);
  compute_segments(l, list, n, token, nonzero, times, spans);
  add_down_bias(w, n);
  if (check_predictor_) check_prediction(l, n, stats);
}

void FfnExecutor::set_host_side(const HostSide& host) {
  host_ = host;
}

void FfnExecutor::compute_segments(int64_t l, NeuronList& list, int64_t n, int64_t token,
                                   uint64_t* nonzero, ForwardTimes& times, TimeSpans& spans) {
  const int64_t ff = c_.ffn_neurons();
  const bool split = host_.backend != nullptr;
  if (split) {
    // The selection comes to the host next (the store's begin): the CPU waits for the device's
    // attention, predictor and selection.
    const Timer wait;
    backend_.synchronize();
    times.ffn_host_waits += wait.seconds();
  }
  store_->begin(l, list, token);
  if (split) {
    // The RAM part's input on the host, fetched before the device's part is queued so that the
    // two parts then compute at the same time.
    const uint64_t rows_bytes = static_cast<uint64_t>(n * c_.n_embd) * sizeof(float);
    backend_.download(host_.ws->xn, ws_.xn, rows_bytes);
    link_bytes_ += rows_bytes;
    const FfnStore::RowTypes rows = store_->row_types(l);
    host_.backend->prepare(*host_.in, host_.ws->xn, c_.n_embd, n,
                           {rows.up, ffn_has_gate(c_.ffn) ? rows.gate : rows.up});
  }
  FfnSegment s;
  Event device_idle{};  // a split: the device's part done (its timeline), the CPU's begins
  bool host_part = false;
  for (int pass = 0; store_->next(s); ++pass) {
    if (pass == 0 && ahead_ && n <= ahead_->rows && l + 1 < c_.n_layer) {
      // This layer's reads are in: the next layer's go out while this one computes (a prompt
      // batch's: the union of its tokens' guesses). Marked as used by the previous token, so
      // wrong guesses stay evictable.
      const double mark = timeline_now(timeline_);
      const Event start = backend_.record();
      prefetch(l + 1, n, token - 1);
      const Event end = backend_.record();
      spans.add(start, end, &times.predictor, 1, &backend_);
      spans.add(start, end, &times.ffn, -1, &backend_);
      timeline_span(timeline_, TimelinePart::Ahead, l + 1, mark);
    }
    // The store records its lookups and waits; from here to the next segment: products.
    const double products = timeline_now(timeline_);
    float* out = pass == 0 ? ws_.proj : ws_.pass_out;
    if (split && s.device != backend_.device()) {
      if (!host_part) device_idle = backend_.record();
      host_part = true;
      const Timer cpu_part;
      host_segment(l, s, n, out);
      times.ffn_ram_part += cpu_part.seconds();
      link_bytes_ += static_cast<uint64_t>(n * c_.n_embd) * sizeof(float);
      if (pass > 0) backend_.add(ws_.proj, ws_.pass_out, n * c_.n_embd);
      continue;
    }
    const Event device_start = backend_.record();
    const float* up_bias = weights_.layer(l).vec(LayerVector::FfnUpBias);
    if (s.partial && lora_ != nullptr)
      fail("--lora: a flash tier's partial reads do not take adapters");
    if (s.partial)
      split_segment(backend_, ws_, in_, s, n, up_bias);
    else
      gather_segment(l, s, n, up_bias);
    for (int64_t b = 0; b < n; ++b)
      backend_.activation(c_.ffn, ws_.gate_c + b * ff + s.begin, ws_.up_c + b * ff + s.begin,
                          ws_.h_c + b * ff + s.begin, s.end - s.begin);
    backend_.keep_needed(ws_.h_c, s.need != nullptr ? s.need : ws_.need, n, ff, s.begin, s.end,
                         nonzero);
    if (c_.moe())
      backend_.scale_by_expert(ws_.h_c + s.begin, segment_ids(s), ws_.expert_weights, n, ff,
                               c_.n_ff, c_.n_expert);
    // The neuron ids (not the rows) decide the order of additions: every split of the
    // neurons sums to the same bits.
    backend_.axpy(s.down_t, s.rows, ws_.h_c + s.begin, ff, n, out, c_.n_embd, s.neurons, ff);
    if (lora_ != nullptr)
      lora_->add_columns(lora_->find(l, LayerMatrix::FfnDown), segment_ids(s), ws_.h_c + s.begin,
                         ff, n, out, c_.n_embd);
    if (split) spans.add(device_start, backend_.record(), &times.ffn_device_part, 1, &backend_);
    if (pass > 0) backend_.add(ws_.proj, ws_.pass_out, n * c_.n_embd);
    timeline_span(timeline_, TimelinePart::Ffn, l, products);
  }
  // The device from the end of its own part to the arrival of the CPU's sum: idle.
  if (host_part) spans.add(device_idle, backend_.record(), &times.ffn_device_waits, 1, &backend_);
}

void FfnExecutor::host_segment(int64_t l, FfnSegment& s, int64_t n, float* out) {
  // The part below the device on the CPU while the device computes its own; its sum goes to the
  // device.
  const int64_t ff = c_.ffn_neurons();
  Backend& cpu = *host_.backend;
  Workspace& w = *host_.ws;
  const uint8_t* need = s.need;
  const std::vector<float>& bias =
      model_.weights.layers[static_cast<size_t>(l)].vec(LayerVector::FfnUpBias);  // the host's copy
  const float* up_bias = bias.empty() ? nullptr : bias.data();
  if (s.partial) {
    split_segment(cpu, w, *host_.in, s, n, up_bias);
  } else {
    const RowsJob jobs[2] = {{&s.up, w.up_c + s.begin, ff}, {&s.gate, w.gate_c + s.begin, ff}};
    cpu.gather(std::span(jobs, ffn_has_gate(c_.ffn) ? 2 : 1), s.rows, *host_.in, need + s.begin,
               ff);
    if (up_bias != nullptr) cpu.add_bias_of(w.up_c + s.begin, up_bias, segment_ids(s), n, ff);
  }
  for (int64_t b = 0; b < n; ++b)
    cpu.activation(c_.ffn, w.gate_c + b * ff + s.begin, w.up_c + b * ff + s.begin,
                   w.h_c + b * ff + s.begin, s.end - s.begin);
  cpu.keep_needed(w.h_c, need, n, ff, s.begin, s.end, host_.nonzero + l * host_.nonzero_stride);
  if (c_.moe())
    cpu.scale_by_expert(w.h_c + s.begin, segment_ids(s), expert_weights_.data(), n, ff, c_.n_ff,
                        c_.n_expert);
  cpu.axpy(s.down_t, s.rows, w.h_c + s.begin, ff, n, w.proj, c_.n_embd, s.neurons, ff);
  backend_.upload(out, w.proj, static_cast<uint64_t>(n * c_.n_embd) * sizeof(float));
}

std::span<const int32_t> FfnExecutor::segment_ids(const FfnSegment& s) {
  return s.neurons.empty() ? s.rows : s.neurons;
}

void FfnExecutor::gather_segment(int64_t layer, const FfnSegment& s, int64_t n,
                                 const float* up_bias) {
  const int64_t ff = c_.ffn_neurons();
  const bool gated = ffn_has_gate(c_.ffn);
  const uint8_t* need = (s.need != nullptr ? s.need : ws_.need) + s.begin;
  if (mode_ == FfnMode::GateFirst) {
    // The deciding values are computed already: select them, gather the rest.
    const std::span<const int32_t> ids(ws_.ids + s.begin, static_cast<size_t>(s.end - s.begin));
    backend_.select_columns(gated ? ws_.gate : ws_.up, ids, n, ff,
                            (gated ? ws_.gate_c : ws_.up_c) + s.begin);
    const RowsJob up{&s.up, ws_.up_c + s.begin, ff};
    if (!gated) return;  // the up values selected already hold their bias (and adapters)
    backend_.gather(std::span(&up, 1), s.rows, in_, need, ff);
    if (lora_ != nullptr)
      lora_->add_rows(lora_->find(layer, LayerMatrix::FfnUp), ws_.xn, n, segment_ids(s), need, ff,
                      ws_.up_c + s.begin);
    if (up_bias != nullptr)
      backend_.add_bias_of(ws_.up_c + s.begin, up_bias, segment_ids(s), n, ff);
    return;
  }
  const RowsJob jobs[2] = {{&s.up, ws_.up_c + s.begin, ff}, {&s.gate, ws_.gate_c + s.begin, ff}};
  backend_.gather(std::span(jobs, gated ? 2 : 1), s.rows, in_, need, ff);
  if (up_bias != nullptr) backend_.add_bias_of(ws_.up_c + s.begin, up_bias, segment_ids(s), n, ff);
  if (lora_ != nullptr) {
    const std::span<const int32_t> ids = segment_ids(s);
    lora_->add_rows(lora_->find(layer, LayerMatrix::FfnUp), ws_.xn, n, ids, need, ff,
                    ws_.up_c + s.begin);
    if (gated)
      lora_->add_rows(lora_->find(layer, LayerMatrix::FfnGate), ws_.xn, n, ids, need, ff,
                      ws_.gate_c + s.begin);
  }
}

void FfnExecutor::split_segment(Backend& be, Workspace& w, PreparedRows& in, FfnSegment& s,
                                int64_t n, const float* up_bias) {
  // The deciding row (gate, or up without a gate) of every neuron, then the rest of those it
  // says are non-zero for a token that needs them; the others' output is zero anyway. Only
  // segments held on the host are partial (the flash tier's), so `be` is the CPU and the
  // deciding values can be read as soon as the gather returns.
  const int64_t ff = c_.ffn_neurons();
  const bool gated = ffn_has_gate(c_.ffn);
  uint8_t* need = s.need != nullptr ? s.need : w.need;
  const RowsJob up{&s.up, w.up_c + s.begin, ff}, gate{&s.gate, w.gate_c + s.begin, ff};
  const RowsJob& first = gated ? gate : up;
  be.gather(std::span(&first, 1), s.rows, in, need + s.begin, ff);
  if (up_bias != nullptr && !gated) be.add_bias_of(first.y, up_bias, segment_ids(s), n, ff);
  // A neuron no token fires is dropped whole; one that fires for some token keeps the tokens
  // that need it (those whose deciding value is not positive get a zero output anyway): the
  // rest's products are then chosen (panel or single, gather_panels.h) as with whole reads, so
  // both give the same bits.
  active_.clear();
  for (int64_t k = 0; k < s.end - s.begin; ++k) {
    bool on = false;
    for (int64_t b = 0; b < n && !on; ++b)
      on = need[b * ff + s.begin + k] != 0 && first.y[b * ff + k] > 0.0f;
    if (on) {
      active_.push_back(s.neurons[static_cast<size_t>(k)]);
      continue;
    }
    for (int64_t b = 0; b < n; ++b) need[b * ff + s.begin + k] = 0;
  }
  store_->refine(s, active_);
  if (gated) be.gather(std::span(&up, 1), s.rows, in, need + s.begin, ff);
  if (up_bias != nullptr && gated) be.add_bias_of(up.y, up_bias, segment_ids(s), n, ff);
}

void FfnExecutor::check_prediction(int64_t l, int64_t n, FfnLayerStats& st) {
  // The dense activations are the truth (in_ still holds the normed FFN input). Counted on the
  // host: --check-predictor is a measurement of host-side runs.
  const ResidentLayer& w = weights_.layer(l);
  const int64_t ff = c_.ffn_neurons();
  const RowsJob both[2] = {{&w.ffn_gate, ws_.gate, ff}, {&w.ffn_up, ws_.up, ff}};
  const bool gated = ffn_has_gate(c_.ffn);
  backend_.matmul(gated ? std::span(both, 2) : std::span(both + 1, 1), in_);
  if (const float* b = w.vec(LayerVector::FfnUpBias)) backend_.add_bias(ws_.up, b, n, ff);
  backend_.activation(c_.ffn, ws_.gate, ws_.up, ws_.up, n * ff);
  backend_.synchronize();
  for (int64_t i = 0; i < n * ff; ++i) {
    const bool active = ws_.up[i] != 0.0f, predicted = ws_.mask[i] != 0;
    st.truly_active += active;
    st.predicted += predicted;
    st.predicted_and_active += active && predicted;
  }
}

}  // namespace strata
