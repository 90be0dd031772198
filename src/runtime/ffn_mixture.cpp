// The FFN of a mixture-of-experts layer (ffn_executor.h): the router's decision, and the dense
// mixture. (The sparse modes run a mixture through the sparse FFN, ffn_executor.cpp, as one FFN
// of every expert's neurons, route_to_neurons its first selection.) The router's logits
// come to the host, where the routing decision is made (model/expert_routing.h); every
// expert some token chose runs once, over the rows of the tokens that chose it, so a prompt
// batch reads each chosen expert's weights once; its outputs go to the tokens' choice slots,
// and mix_experts weighs and sums each token's slots in the order of its choice.
#include <algorithm>
#include <cmath>

#include "core/timer.h"
#include "model/expert_routing.h"
#include "runtime/ffn_executor.h"

namespace strata {

template <typename Vec>
FfnExecutor::ExpertBiases FfnExecutor::biases_of(const Vec& vec, int64_t e) const {
  const auto at = [&](LayerVector v, int64_t width) -> const float* {
    const float* all = vec(v);
    return all != nullptr ? all + e * width : nullptr;
  };
  return {at(LayerVector::ExpertGateBias, c_.n_ff), at(LayerVector::ExpertUpBias, c_.n_ff),
          at(LayerVector::ExpertDownBias, c_.n_embd)};
}

void FfnExecutor::route(int64_t l, int64_t n) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t n_expert = c_.n_expert, k = c_.n_expert_used;
  const bool shared = w.shared_gate.data != nullptr;
  if (!c_.routed(l)) {  // a leading dense layer: its one always-used expert
    chosen_.clear();
    mix_weights_.clear();
    shared_logits_.clear();
    return;
  }
  backend_.prepare(in_, ws_.xn, c_.n_embd, n,
                   {w.ffn_gate_inp.type, shared ? w.shared_gate.type : w.ffn_gate_inp.type});
  // The router, and a shared expert's gate (its logit) in the same pass over the input.
  const RowsJob jobs[2] = {{&w.ffn_gate_inp, ws_.router, n_expert}, {&w.shared_gate, ws_.shared_gate, 1}};
  backend_.matmul(std::span(jobs, shared ? 2 : 1), in_);
  if (const float* bias = w.vec(LayerVector::RouterBias))  // gpt-oss
    backend_.add_bias(ws_.router, bias, n, n_expert);
  router_logits_.resize(static_cast<size_t>(n * n_expert));
  backend_.download(router_logits_.data(), ws_.router, router_logits_.size() * sizeof(float));
  shared_logits_.resize(shared ? static_cast<size_t>(n) : 0);
  if (shared) backend_.download(shared_logits_.data(), ws_.shared_gate, n * sizeof(float));
  chosen_.resize(static_cast<size_t>(n * k));
  mix_weights_.resize(chosen_.size());
  const std::vector<float>& selection_bias =
      model_.weights.layers[static_cast<size_t>(l)].vec(LayerVector::ExpertSelectionBias);
  route_tokens(router_logits_.data(), n, n_expert, k, c_.routing(),
               selection_bias.empty() ? nullptr : selection_bias.data(), chosen_.data(),
               mix_weights_.data());
}

void FfnExecutor::route_to_neurons(int64_t l, int64_t n) {
  route(l, n);
  const int64_t n_expert = c_.n_expert, k = c_.n_expert_used;
  // Each token's weight of every expert (0 where it did not choose it), and the experts any
  // token chose, ascending: the only ones whose deciding rows are computed.
  expert_weights_.assign(static_cast<size_t>(n * n_expert), 0.0f);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t s = 0; s < k; ++s)
      expert_weights_[static_cast<size_t>(b * n_expert + chosen_[static_cast<size_t>(b * k + s)])] =
          mix_weights_[static_cast<size_t>(b * k + s)];
  chosen_experts_.assign(chosen_.begin(), chosen_.end());
  std::sort(chosen_experts_.begin(), chosen_experts_.end());
  chosen_experts_.erase(std::unique(chosen_experts_.begin(), chosen_experts_.end()),
                        chosen_experts_.end());
  backend_.upload(ws_.expert_weights, expert_weights_.data(),
                  expert_weights_.size() * sizeof(float));
}

void FfnExecutor::mixture(int64_t l, int64_t n, FfnLayerStats& stats, uint64_t* nonzero,
                          ForwardTimes& times, TimeSpans& spans, const FfnObserver& observer) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t n_expert = c_.n_expert, d = c_.n_embd;
  const int64_t k = c_.routed(l) ? c_.n_expert_used : 0;
  const int64_t neurons = c_.ffn_neurons(), ff = c_.n_ff;
  const bool split = host_.backend != nullptr;
  route(l, n);
  if (observer) observed_.assign(static_cast<size_t>(n * neurons), 0.0f);
  // Each token's slots: its k experts in the order of its choice, then a shared expert's,
  // weighed by the sigmoid of its gate (1 without one: GLM-4.5's, a leading dense layer).
  const bool shared = w.shared.up.data != nullptr;
  const int64_t slots = k + (shared ? 1 : 0);
  slot_weights_.resize(static_cast<size_t>(n * slots));
  for (int64_t b = 0; b < n; ++b) {
    std::copy_n(mix_weights_.begin() + b * k, k, slot_weights_.begin() + b * slots);
    if (shared)
      slot_weights_[static_cast<size_t>(b * slots + k)] =
          shared_logits_.empty()
              ? 1.0f
              : static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(
                                                     shared_logits_[static_cast<size_t>(b)]))));
  }
  backend_.upload(ws_.mix_weights, slot_weights_.data(), slot_weights_.size() * sizeof(float));
  const uint64_t row_bytes = static_cast<uint64_t>(d) * sizeof(float);
  if (split) {  // the CPU's experts read the normalized input on the host
    backend_.download(host_.ws->xn, ws_.xn, static_cast<uint64_t>(n) * row_bytes);
    link_bytes_ += static_cast<uint64_t>(n) * row_bytes;
  }
  const Side device{&backend_, &ws_, &in_, nonzero};
  const Side host{host_.backend, host_.ws, host_.in, split ? host_.nonzero + l * host_.nonzero_stride : nullptr};
  // Pass 0: the experts held here (a device queues them and computes while the CPU works);
  // pass 1, split only: the CPU's, each output uploaded to its slot. The device's part and its
  // wait for the CPU's outputs are timed on its timeline.
  const Event device_start = split ? backend_.record() : Event{};
  Event device_end{};
  for (int pass = 0; pass < (split ? 2 : 1); ++pass) {
    if (split && pass == 1) {
      device_end = backend_.record();
      spans.add(device_start, device_end, &times.ffn_device_part, 1, &backend_);
    }
    const Timer cpu_part;
    for (int64_t e = 0; e < (k > 0 ? n_expert : 0); ++e) {
      const ExpertMatrices& x = w.experts[static_cast<size_t>(e)];
      if (split && (x.up.data != nullptr) != (pass == 0)) continue;
      expert_rows_.clear();
      expert_slots_.clear();
      for (int64_t b = 0; b < n; ++b)
        for (int64_t s = 0; s < k; ++s)
          if (chosen_[static_cast<size_t>(b * k + s)] == e) {
            expert_rows_.push_back(b);
            expert_slots_.push_back(b * slots + s);
          }
      const auto count = static_cast<int64_t>(expert_rows_.size());
      if (count == 0) continue;
      const LayerWeights& in_ram = model_.weights.layers[static_cast<size_t>(l)];
      const ExpertMatrices& held = pass == 0 ? x : in_ram.experts[static_cast<size_t>(e)];
      const ExpertBiases biases =
          pass == 0 ? biases_of([&](LayerVector v) { return w.vec(v); }, e)
                    : biases_of(
                          [&](LayerVector v) {
                            const std::vector<float>& values = in_ram.vec(v);
                            return values.empty() ? nullptr : values.data();
                          },
                          e);
      run_expert(pass == 0 ? device : host, held, biases, n, stats,
                 observer ? observed_.data() + e * ff : nullptr);
      const auto pairs = static_cast<uint64_t>(count * ff);
      if (!split) continue;
      (pass == 0 ? expert_split_.device_pairs : expert_split_.host_pairs) += pairs;
      (pass == 0 ? expert_split_.device_rows : expert_split_.host_rows) += static_cast<uint64_t>(ff);
      if (pass == 0) continue;
      for (const int64_t slot : expert_slots_)
        backend_.upload(ws_.expert_out + slot * d, host_.ws->expert_out + slot * d, row_bytes);
      link_bytes_ += static_cast<uint64_t>(count) * row_bytes;
    }
    if (pass == 1) times.ffn_ram_part += cpu_part.seconds();
    if (pass == 0 && shared) {  // every token's shared expert, where the dense blocks are
      expert_rows_.clear();
      expert_slots_.clear();
      for (int64_t b = 0; b < n; ++b) {
        expert_rows_.push_back(b);
        expert_slots_.push_back(b * slots + k);
      }
      run_expert(device, w.shared, {}, n, stats, nullptr);
    }
  }
  if (split) spans.add(device_end, backend_.record(), &times.ffn_device_waits, 1, &backend_);
  backend_.mix_experts(ws_.expert_out, ws_.mix_weights, n, slots, d, ws_.proj);
  if (observer) observer(l, n, ws_.x, observed_.data());
}

void FfnExecutor::run_expert(const Side& side, const ExpertMatrices& x,
                             const ExpertBiases& biases, int64_t n, FfnLayerStats& stats,
                             float* observed) {
  Backend& be = *side.backend;
  Workspace& ws = *side.ws;
  const int64_t d = c_.n_embd, neurons = c_.ffn_neurons();
  const auto count = static_cast<int64_t>(expert_rows_.size());
  const uint64_t row_bytes = static_cast<uint64_t>(d) * sizeof(float);
  if (n == 1) {  // decode: the one token's row in, its slot out
    expert_ffn(side, x, biases, ws.xn, 1, ws.expert_out + expert_slots_[0] * d, stats, observed,
               expert_rows_.data(), neurons);
    return;
  }
  // The expert's tokens' rows side by side (all of them: the batch itself), its outputs to
  // their slots.
  const float* in = ws.xn;
  if (count < n) {
    for (int64_t i = 0; i < count; ++i)
      be.copy(ws.expert_in + i * d, ws.xn + expert_rows_[static_cast<size_t>(i)] * d, row_bytes);
    in = ws.expert_in;
  }
  expert_ffn(side, x, biases, in, count, ws.expert_y, stats, observed, expert_rows_.data(),
             neurons);
  for (int64_t i = 0; i < count; ++i)
    be.copy(ws.expert_out + expert_slots_[static_cast<size_t>(i)] * d, ws.expert_y + i * d,
            row_bytes);
}

void FfnExecutor::expert_ffn(const Side& side, const ExpertMatrices& e,
                             const ExpertBiases& biases, const float* x, int64_t count, float* out,
                             FfnLayerStats& stats, float* observed, const int64_t* rows,
                             int64_t stride) {
  Backend& be = *side.backend;
  Workspace& ws = *side.ws;
  PreparedRows& in = *side.in;
  const int64_t ff = e.up.rows;  // a routed expert's n_ff, or a shared expert's n_ff_shared
  const bool gated = ffn_has_gate(c_.ffn);
  be.prepare(in, x, c_.n_embd, count, {e.up.type, gated ? e.gate.type : e.up.type});
  const RowsJob both[2] = {{&e.gate, ws.gate, ff}, {&e.up, ws.up, ff}};
  be.matmul(gated ? std::span(both, 2) : std::span(both + 1, 1), in);
  if (biases.gate != nullptr && gated) be.add_bias(ws.gate, biases.gate, count, ff);
  if (biases.up != nullptr) be.add_bias(ws.up, biases.up, count, ff);
  be.activation(c_.ffn, ws.gate, ws.up, ws.up, count * ff);
  stats.computed += static_cast<uint64_t>(count * ff);
  be.keep_needed(ws.up, nullptr, count, ff, 0, ff, side.nonzero);
  if (observed != nullptr) {  // the observer runs on the host: ws.up is host memory
    be.synchronize();
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(ws.up + i * ff, ff, observed + rows[i] * stride);
  }
  be.prepare(in, ws.up, ff, count, {e.down.type});
  const RowsJob down{&e.down, out, c_.n_embd};
  be.matmul(std::span(&down, 1), in);
  if (biases.down != nullptr) be.add_bias(out, biases.down, count, c_.n_embd);
}

}  // namespace strata
