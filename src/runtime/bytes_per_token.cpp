#include "runtime/bytes_per_token.h"

namespace strata {

std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before) {
  std::vector<FfnLayerStats> d = after;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i].computed -= before[i].computed;
    d[i].nonzero -= before[i].nonzero;
    d[i].rows_read -= before[i].rows_read;
    d[i].truly_active -= before[i].truly_active;
    d[i].predicted -= before[i].predicted;
    d[i].predicted_and_active -= before[i].predicted_and_active;
  }
  return d;
}

namespace {

// A mixture's experts: dense, the k chosen experts whole; gate-first, their deciding rows whole
// and the firing neurons' other rows; predict, the predictor (fc2's rows of the k chosen
// experts) and the predicted neurons' rows (counted per token, as a dense layer's).
uint64_t mixture_bytes_per_token(const Model& model, const LayerWeights& l, FfnMode mode,
                                 const FfnLayerStats& stats, double tokens) {
  const ExpertMatrices& x = l.experts[0];
  const auto k = static_cast<uint64_t>(model.config.n_expert_used);
  const auto n_expert = static_cast<uint64_t>(model.config.n_expert);
  const bool gated = ffn_has_gate(model.config.ffn);
  if (mode == FfnMode::Dense) return k * (x.gate.bytes() + x.up.bytes() + x.down.bytes());
  const double per_token = tokens > 0 ? static_cast<double>(stats.computed) / tokens : 0.0;
  if (mode == FfnMode::Predict) {
    const uint64_t row = x.gate.row_bytes + x.up.row_bytes + l.ffn_down_t.row_bytes;
    return l.predictor.fc1.bytes() + l.predictor.fc2.bytes() / n_expert * k +
           static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  const uint64_t row = (gated ? x.up.row_bytes : 0) + l.ffn_down_t.row_bytes;
  return k * (gated ? x.gate.bytes() : x.up.bytes()) +
         static_cast<uint64_t>(per_token * static_cast<double>(row));
}

}  // namespace

uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens) {
  const ModelWeights& w = model.weights;
  uint64_t total = w.output.bytes() + w.token_embd.row_bytes;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    total += l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes() + l.attn_output.bytes();
    total += shared_expert_bytes(l);  // every token's (a leading dense layer's FFN too)
    if (!l.experts.empty()) {
      total += l.ffn_gate_inp.bytes() + mixture_bytes_per_token(model, l, mode, stats[i], tokens);
      continue;
    }
    if (mode == FfnMode::Dense) {
      total += l.ffn_gate.bytes() + l.ffn_up.bytes() +
               (l.ffn_down.data != nullptr ? l.ffn_down.bytes() : l.ffn_down_t.bytes());
      continue;
    }
    const double per_token = tokens > 0 ? static_cast<double>(stats[i].computed) / tokens : 0.0;
    uint64_t row = l.ffn_up.row_bytes + l.ffn_down_t.row_bytes;
    if (mode == FfnMode::Predict) {
      row += l.ffn_gate.row_bytes;
      total += l.predictor.fc1.bytes() + l.predictor.fc2.bytes();
    } else {
      total += ffn_has_gate(model.config.ffn) ? l.ffn_gate.bytes() : 0;
    }
    total += static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  return total;
}

uint64_t input_sparse_bytes_per_token(const Model& model,
                                      const std::vector<InputDensity>& density) {
  const ModelWeights& w = model.weights;
  double total = static_cast<double>(w.output.bytes() + w.token_embd.row_bytes);
  for (size_t i = 0; i < w.layers.size() && i < model.columns.size(); ++i) {
    const LayerColumns& c = model.columns[i];
    const InputDensity& d = density[i];
    auto share = [&](MatrixInput k) {
      const auto p = static_cast<size_t>(k);
      return d.seen[p] > 0 ? static_cast<double>(d.kept[p]) / static_cast<double>(d.seen[p]) : 1.0;
    };
    // A fused copy's parts have empty views (LayerColumns): either side is the whole input's.
    total +=
        share(MatrixInput::Attention) * static_cast<double>(c.attn_qkv.bytes() + c.attn_q.bytes() +
                                                            c.attn_k.bytes() + c.attn_v.bytes());
    total += share(MatrixInput::AttentionOutput) * static_cast<double>(c.attn_output.bytes());
    total += share(MatrixInput::Ffn) *
             static_cast<double>(c.ffn_gate_up.bytes() + c.ffn_gate.bytes() + c.ffn_up.bytes());
    // Inputs without copies (column_products_pay) read their row-major matrices whole.
    const LayerWeights& l = w.layers[i];
    if (!c.attention())
      total += static_cast<double>(l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes());
    if (c.attn_output.data == nullptr) total += static_cast<double>(l.attn_output.bytes());
    if (!c.ffn(ffn_has_gate(model.config.ffn)))
      total += static_cast<double>(l.ffn_gate.bytes() + l.ffn_up.bytes());
    total += c.ffn_down.data != nullptr
                 ? share(MatrixInput::FfnHidden) * static_cast<double>(c.ffn_down.bytes())
                 : static_cast<double>(l.ffn_down.data != nullptr ? l.ffn_down.bytes()
                                                                  : l.ffn_down_t.bytes());
  }
  return static_cast<uint64_t>(total);
}

}  // namespace strata
