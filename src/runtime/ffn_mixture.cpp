// The FFN of a mixture-of-experts layer (ffn_executor.h): the router's decision, and the dense
// mixture. (The sparse modes run a mixture through the sparse FFN, ffn_executor.cpp, as one FFN
// of every expert's neurons, route_to_neurons its first selection.) The router's logits
// come to the host, where the routing decision is made (runtime/expert_routing.h); every
// expert some token chose runs once, over the rows of the tokens that chose it, so a prompt
// batch reads each chosen expert's weights once; its outputs go to the tokens' choice slots,
// and mix_experts weighs and sums each token's slots in the order of its choice.
#include <algorithm>

#include "runtime/expert_routing.h"
#include "runtime/ffn_executor.h"

namespace strata {

void FfnExecutor::route(int64_t l, int64_t n) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t n_expert = c_.n_expert, k = c_.n_expert_used;
  backend_.prepare(in_, ws_.xn, c_.n_embd, n, {w.ffn_gate_inp.type});
  const RowsJob router{&w.ffn_gate_inp, ws_.router, n_expert};
  backend_.matmul(std::span(&router, 1), in_);
  router_logits_.resize(static_cast<size_t>(n * n_expert));
  backend_.download(router_logits_.data(), ws_.router, router_logits_.size() * sizeof(float));
  chosen_.resize(static_cast<size_t>(n * k));
  mix_weights_.resize(chosen_.size());
  route_tokens(router_logits_.data(), n, n_expert, k, ExpertWeighting::SoftmaxOfChosen,
               chosen_.data(), mix_weights_.data());
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
                          const FfnObserver& observer) {
  const ResidentLayer& w = weights_.layer(l);
  const int64_t n_expert = c_.n_expert, k = c_.n_expert_used, d = c_.n_embd;
  const int64_t neurons = c_.ffn_neurons(), ff = c_.n_ff;
  route(l, n);
  if (observer) observed_.assign(static_cast<size_t>(n * neurons), 0.0f);
  backend_.upload(ws_.mix_weights, mix_weights_.data(), mix_weights_.size() * sizeof(float));
  const uint64_t row_bytes = static_cast<uint64_t>(d) * sizeof(float);
  for (int64_t e = 0; e < n_expert; ++e) {
    expert_rows_.clear();
    expert_slots_.clear();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < k; ++s)
        if (chosen_[static_cast<size_t>(b * k + s)] == e) {
          expert_rows_.push_back(b);
          expert_slots_.push_back(b * k + s);
        }
    const auto count = static_cast<int64_t>(expert_rows_.size());
    if (count == 0) continue;
    const ExpertMatrices& x = w.experts[static_cast<size_t>(e)];
    float* observed = observer ? observed_.data() + e * ff : nullptr;
    if (n == 1) {  // decode: the one token's row in, its slot out
      expert_ffn(x, ws_.xn, 1, ws_.expert_out + expert_slots_[0] * d, stats, nonzero, observed,
                 expert_rows_.data(), neurons);
      continue;
    }
    // The expert's tokens' rows side by side (all of them: the batch itself), its outputs to
    // their slots.
    const float* in = ws_.xn;
    if (count < n) {
      for (int64_t i = 0; i < count; ++i)
        backend_.copy(ws_.expert_in + i * d, ws_.xn + expert_rows_[static_cast<size_t>(i)] * d,
                      row_bytes);
      in = ws_.expert_in;
    }
    expert_ffn(x, in, count, ws_.expert_y, stats, nonzero, observed, expert_rows_.data(), neurons);
    for (int64_t i = 0; i < count; ++i)
      backend_.copy(ws_.expert_out + expert_slots_[static_cast<size_t>(i)] * d,
                    ws_.expert_y + i * d, row_bytes);
  }
  backend_.mix_experts(ws_.expert_out, ws_.mix_weights, n, k, d, ws_.proj);
  if (observer) observer(l, n, ws_.x, observed_.data());
}

void FfnExecutor::expert_ffn(const ExpertMatrices& e, const float* x, int64_t count, float* out,
                             FfnLayerStats& stats, uint64_t* nonzero, float* observed,
                             const int64_t* rows, int64_t stride) {
  const int64_t ff = c_.n_ff;
  const bool gated = ffn_has_gate(c_.ffn);
  backend_.prepare(in_, x, c_.n_embd, count, {e.up.type, gated ? e.gate.type : e.up.type});
  const RowsJob both[2] = {{&e.gate, ws_.gate, ff}, {&e.up, ws_.up, ff}};
  backend_.matmul(gated ? std::span(both, 2) : std::span(both + 1, 1), in_);
  backend_.activation(c_.ffn, ws_.gate, ws_.up, ws_.up, count * ff);
  stats.computed += static_cast<uint64_t>(count * ff);
  backend_.keep_needed(ws_.up, nullptr, count, ff, 0, ff, nonzero);
  if (observed != nullptr) {  // the observer runs on the host: ws.up is host memory
    backend_.synchronize();
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(ws_.up + i * ff, ff, observed + rows[i] * stride);
  }
  backend_.prepare(in_, ws_.up, ff, count, {e.down.type});
  const RowsJob down{&e.down, out, c_.n_embd};
  backend_.matmul(std::span(&down, 1), in_);
}

}  // namespace strata
