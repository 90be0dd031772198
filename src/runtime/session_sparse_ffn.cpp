// The sparse FFN modes of Session: pick neurons (predictor or dense gate), take the union over
// the batch, compute gate/up rows for those neurons only (gather), and the down projection as
// a weighted sum of their ffn_down_t rows (axpy). Each token still uses only its own neurons:
// entries a token did not select are skipped and count as zero, so a batch gives the same
// result as its tokens one at a time.
#include <algorithm>

#include "core/timer.h"
#include "kernels/cpu/sparse_ops.h"
#include "runtime/session.h"

namespace strata {

void Session::predict_neurons(int64_t l, int64_t n) {
  const LayerPredictor& p = model_.weights.layers[l].predictor;
  const int64_t rank = p.rank(), ff = c_.n_ff;
  const std::span<const PreparedInput> in(inputs_.data(), n);
  // The predictor reads the residual stream before ffn_norm, as PowerInfer's do.
  prepare_inputs(x_.data(), c_.n_embd, n, needs_q8_input(p.fc1.type));
  matmat_multi(kernels_, {{&p.fc1, pred_hidden_.data(), rank}}, in, pool_);
  for (int64_t i = 0; i < n * rank; ++i) pred_hidden_[i] = std::max(pred_hidden_[i], 0.0f);
  prepare_inputs(pred_hidden_.data(), rank, n, needs_q8_input(p.fc2.type));
  matmat_multi(kernels_, {{&p.fc2, pred_scores_.data(), ff}}, in, pool_);
  for (int64_t i = 0; i < n * ff; ++i) mask_[i] = pred_scores_[i] >= p.threshold;
}

void Session::check_prediction(int64_t l, int64_t n) {
  // inputs_ hold the normed FFN input: the dense activations are the truth.
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t ff = c_.n_ff;
  const std::span<const PreparedInput> in(inputs_.data(), n);
  if (ffn_has_gate(c_.ffn))
    matmat_multi(kernels_, {{&w.ffn_gate, gate_.data(), ff}, {&w.ffn_up, up_.data(), ff}}, in,
                 pool_);
  else
    matmat_multi(kernels_, {{&w.ffn_up, up_.data(), ff}}, in, pool_);
  ffn_activation(gate_.data(), up_.data(), up_.data(), n * ff);
  FfnLayerStats& st = ffn_stats_[l];
  for (int64_t i = 0; i < n * ff; ++i) {
    const bool active = up_[i] != 0.0f, predicted = mask_[i] != 0;
    st.truly_active += active;
    st.predicted += predicted;
    st.predicted_and_active += active && predicted;
  }
}

void Session::sparse_ffn(int64_t l, int64_t n) {
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t ff = c_.n_ff;
  const bool gated = ffn_has_gate(c_.ffn);
  const bool predict = options_.ffn == FfnMode::Predict;
  if (predict) {
    Timer t;
    predict_neurons(l, n);
    times_.predictor += t.seconds();
  }

  for (int64_t b = 0; b < n; ++b)
    rms_norm(x_.data() + b * c_.n_embd, w.ffn_norm.data(), xn_.data() + b * c_.n_embd, c_.n_embd,
             c_.rms_eps);
  // Bundled models keep gate/up on flash: their type is the bundles'.
  const bool bundled = model_.weights.bundled;
  const DType up_type = bundled ? model_.weights.bundle.type : w.ffn_up.type;
  const DType gate_type = bundled ? model_.weights.bundle.type : w.ffn_gate.type;
  prepare_inputs(xn_.data(), c_.n_embd, n,
                 needs_q8_input(up_type) || (gated && needs_q8_input(gate_type)));
  const std::span<const PreparedInput> in(inputs_.data(), n);

  if (!predict) {
    // Gate-first: the gate (the up projection for plain ReLU) densely; it decides the rest.
    const MatrixView& first = gated ? w.ffn_gate : w.ffn_up;
    float* full = gated ? gate_.data() : up_.data();
    matmat_multi(kernels_, {{&first, full, ff}}, in, pool_);
    for (int64_t i = 0; i < n * ff; ++i) mask_[i] = full[i] > 0.0f;
  }

  // The union of the batch's neurons, in ascending order (rows read in memory order).
  int64_t n_ids = 0;
  for (int64_t i = 0; i < ff; ++i) {
    bool any = false;
    for (int64_t b = 0; b < n && !any; ++b) any = mask_[b * ff + i] != 0;
    if (any) ids_[static_cast<size_t>(n_ids++)] = static_cast<int32_t>(i);
  }
  const std::span<const int32_t> ids(ids_.data(), static_cast<size_t>(n_ids));
  uint64_t computed = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < n_ids; ++k) {
      need_[b * ff + k] = mask_[b * ff + ids_[k]];
      computed += need_[b * ff + k];
    }

  uint64_t nonzero = 0;
  if (!caches_.empty()) {
    nonzero = bundled_ffn(l, n, ids, in);
  } else {
    if (predict) {
      const GatherJob jobs[2] = {{&w.ffn_up, up_c_.data(), ff}, {&w.ffn_gate, gate_c_.data(), ff}};
      gather_matmat(kernels_, std::span(jobs, gated ? 2 : 1), ids, in, pool_, need_.data(), ff);
    } else if (gated) {
      const GatherJob job{&w.ffn_up, up_c_.data(), ff};
      gather_matmat(kernels_, std::span(&job, 1), ids, in, pool_, need_.data(), ff);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t k = 0; k < n_ids; ++k) gate_c_[b * ff + k] = gate_[b * ff + ids_[k]];
    } else {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t k = 0; k < n_ids; ++k) up_c_[b * ff + k] = up_[b * ff + ids_[k]];
    }
    nonzero = activate(n, 0, n_ids);
  }
  FfnLayerStats& st = ffn_stats_[l];
  st.computed += computed;
  st.nonzero += nonzero;
  if (l == 0) ffn_activations_ += static_cast<uint64_t>(n * ff);
  if (options_.check_predictor) check_prediction(l, n);

  if (caches_.empty())
    axpy_rows(kernels_, w.ffn_down_t, ids, h_c_.data(), ff, n, proj_.data(), c_.n_embd, pool_);
}

uint64_t Session::activate(int64_t n, int64_t begin, int64_t end) {
  const int64_t ff = c_.n_ff;
  uint64_t nonzero = 0;
  for (int64_t b = 0; b < n; ++b) {
    float* h = h_c_.data() + b * ff;
    ffn_activation(gate_c_.data() + b * ff + begin, up_c_.data() + b * ff + begin, h + begin,
                   end - begin);
    for (int64_t k = begin; k < end; ++k) {
      if (need_[b * ff + k] == 0) h[k] = 0.0f;  // another token's neuron
      nonzero += h[k] != 0.0f;
    }
  }
  return nonzero;
}

uint64_t Session::bundled_ffn(int64_t l, int64_t n, std::span<const int32_t> ids,
                              std::span<const PreparedInput> in) {
  // The layer's neuron cache holds the rows (rows = slots, stride = bundle size). Neurons are
  // fetched, computed and summed into the output in passes of at most the cache's capacity;
  // with one pass (the usual case) the arithmetic is exactly that of the model in RAM.
  const LayerWeights& w = model_.weights.layers[l];
  finish_lookahead();  // the look-ahead reads for this layer, if any, are done now
  NeuronCache& cache = *caches_[static_cast<size_t>(l)];
  const BundleLayout& bl = model_.weights.bundle;
  const int64_t ff = c_.n_ff, n_ids = static_cast<int64_t>(ids.size());
  const bool gated = ffn_has_gate(c_.ffn);
  // Split reads only where a non-positive deciding row means a zero output (ReLU family).
  const bool split = options_.split_reads && bl.head_bytes() < bl.bundle_bytes &&
                     (c_.ffn == FfnActivation::ReGLU || c_.ffn == FfnActivation::DReLU ||
                      c_.ffn == FfnActivation::ReLU);
  auto view = [&](uint64_t offset) {
    return MatrixView{bl.type, cache.data() + offset, c_.n_embd, cache.capacity(), bl.bundle_bytes};
  };
  const MatrixView gate_w = view(bl.gate_offset()), up_w = view(bl.up_offset()),
                   down_w = view(bl.down_offset());
  // Slots for unpinned neurons; pinned ones are always resident.
  const int64_t room = cache.capacity() - cache.pinned();
  int64_t unpinned = n_ids;
  if (cache.pinned() > 0)
    for (int32_t id : ids) unpinned -= cache.is_pinned(id);
  if (unpinned > room) {
    // Several passes: the neurons already in the cache go first, so a prompt batch larger than
    // the cache reuses what the previous batch left instead of cycling through it (plain
    // ascending order would evict every neuron just before it is needed again). The compact
    // per-token selection (need_) moves with its neurons.
    std::vector<int64_t> order(static_cast<size_t>(n_ids));
    int64_t front = 0;
    for (int64_t k = 0; k < n_ids; ++k)
      if (cache.slot_of(ids[static_cast<size_t>(k)]) >= 0) order[static_cast<size_t>(front++)] = k;
    for (int64_t k = 0, back = front; k < n_ids; ++k)
      if (cache.slot_of(ids[static_cast<size_t>(k)]) < 0) order[static_cast<size_t>(back++)] = k;
    reordered_ids_.resize(static_cast<size_t>(n_ids));
    reordered_need_.resize(static_cast<size_t>(n * n_ids));
    for (int64_t k = 0; k < n_ids; ++k) {
      reordered_ids_[static_cast<size_t>(k)] = ids[static_cast<size_t>(order[k])];
      for (int64_t b = 0; b < n; ++b)
        reordered_need_[static_cast<size_t>(b * n_ids + k)] = need_[b * ff + order[k]];
    }
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < n_ids; ++k)
        need_[b * ff + k] = reordered_need_[static_cast<size_t>(b * n_ids + k)];
    ids = reordered_ids_;
  }
  uint64_t nonzero = 0;
  for (int64_t begin = 0, end = 0, pass = 0;; begin = end, ++pass) {
    // A pass takes neurons in order while the unpinned ones fit in the room.
    for (int64_t free = room; end < n_ids; ++end) {
      if (cache.pinned() > 0 && cache.is_pinned(ids[static_cast<size_t>(end)])) continue;
      if (free == 0) break;
      --free;
    }
    const std::span<const int32_t> part =
        ids.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    cache.fetch(part, slots_.data() + begin, *source_, w.bundles_offset, clock_ + n - 1, *io_pool_,
                static_cast<int>(pass), n, split ? bl.head_bytes() : 0);
    const std::span<const int32_t> rows(slots_.data() + begin, part.size());
    const GatherJob up_job{&up_w, up_c_.data() + begin, ff},
        gate_job{&gate_w, gate_c_.data() + begin, ff};
    if (split) {
      // The deciding row of every neuron, then the rest of those it says are non-zero.
      const GatherJob& first = gated ? gate_job : up_job;
      gather_matmat(kernels_, std::span(&first, 1), rows, in, pool_, need_.data() + begin, ff);
      split_active_.clear();
      for (int64_t k = 0; k < end - begin; ++k) {
        bool on = false;
        for (int64_t b = 0; b < n; ++b) {
          uint8_t& need = need_[b * ff + begin + k];
          if (need != 0 && first.y[b * ff + k] > 0.0f)
            on = true;
          else
            need = 0;  // zero output for this token: nothing more to compute
        }
        if (on) split_active_.push_back(part[static_cast<size_t>(k)]);
      }
      cache.complete(split_active_, *source_, w.bundles_offset, *io_pool_);
      for (int64_t k = 0; k < end - begin; ++k) {  // slots moved; dropped neurons: any slot
        const int32_t s = cache.slot_of(part[static_cast<size_t>(k)]);
        slots_[static_cast<size_t>(begin + k)] = s >= 0 ? s : 0;
      }
      if (gated)
        gather_matmat(kernels_, std::span(&up_job, 1), rows, in, pool_, need_.data() + begin, ff);
    } else {
      const GatherJob jobs[2] = {up_job, gate_job};
      gather_matmat(kernels_, std::span(jobs, gated ? 2 : 1), rows, in, pool_, need_.data() + begin,
                    ff);
    }
    nonzero += activate(n, begin, end);
    // The neuron ids (not the slots) decide the order of additions: the RAM result.
    float* out = pass == 0 ? proj_.data() : pass_out_.data();
    axpy_rows(kernels_, down_w, rows, h_c_.data() + begin, ff, n, out, c_.n_embd, pool_, part);
    if (pass > 0)
      for (int64_t i = 0; i < n * c_.n_embd; ++i) proj_[i] += pass_out_[i];
    if (end >= n_ids) break;
  }
  return nonzero;
}

}  // namespace strata
