#include "planning/model_inventory.h"

#include <algorithm>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/down_transpose.h"
#include "model/flash_route.h"
#include "runtime/ffn_executor.h"
#include "runtime/lora_products.h"
#include "runtime/session.h"
#include "tiers/flash_ffn_store.h"

namespace strata {

namespace {

uint64_t norm_bytes(const std::vector<float>& w) {
  return w.size() * sizeof(float);
}

// The down_t a sparse mode transposes at load where the file has none (a mixture's: every
// expert's).
uint64_t derived_down_t_bytes(const LayerWeights& l) {
  if (l.experts.empty()) return transposed_down_bytes(l.ffn_down);
  std::vector<MatrixView> downs;
  for (const ExpertMatrices& x : l.experts) downs.push_back(x.down);
  return transposed_expert_downs_bytes(downs);
}

// Bytes one neuron's rows cost per use: gate and up rows and its down weights. A mixture's
// neurons are every expert's (ModelConfig::ffn_neurons): a dense mixture's as stored, the
// sparse modes' with the ffn_down_t they read.
uint64_t neuron_read_bytes(const ModelWeights& w, const LayerWeights& l, FfnMode mode) {
  if (w.bundled) return w.bundle.bundle_bytes;
  // Column bundles: a neuron's share of the layer's bundles (its down column, n_embd / n_ff of
  // the gate/up columns).
  if (w.column_bundled)
    return l.column_bundle.layer_bytes() / static_cast<uint64_t>(l.column_bundle.n_ff);
  // A mixture's leading dense layer: its FFN is the always-used expert, read with the dense
  // blocks; no routed neuron.
  if (l.experts.empty() && l.ffn_up.data == nullptr) return 0;
  if (!l.experts.empty() && mode == FfnMode::Dense)
    return expert_bytes(l) / l.experts.size() / static_cast<uint64_t>(l.experts[0].up.rows);
  if (!l.experts.empty()) {
    const ExpertMatrices& x = l.experts[0];
    const auto ff = static_cast<uint64_t>(x.up.rows);
    return x.gate.row_bytes + x.up.row_bytes +
           (l.ffn_down_t.data != nullptr ? l.ffn_down_t.row_bytes
                                         : derived_down_t_bytes(l) / l.experts.size() / ff);
  }
  const uint64_t gate = l.ffn_gate.data != nullptr ? l.ffn_gate.row_bytes : 0;
  if (mode == FfnMode::Dense && l.ffn_down.data != nullptr)
    return gate + l.ffn_up.row_bytes + l.ffn_down.bytes() / static_cast<uint64_t>(l.ffn_up.rows);
  return gate + l.ffn_up.row_bytes +
         (l.ffn_down_t.data != nullptr
              ? l.ffn_down_t.row_bytes
              : transposed_down_bytes(l.ffn_down) / static_cast<uint64_t>(l.ffn_up.rows));
}

// RAM the layer's FFN matrices hold (ffn_down_t built at load when a sparse mode needs it).
uint64_t ffn_ram_bytes(const LayerWeights& l, FfnMode mode) {
  uint64_t bytes = l.ffn_gate.bytes() + l.ffn_up.bytes() + l.ffn_down.bytes() +
                   l.ffn_down_t.bytes() + expert_bytes(l);
  if (mode != FfnMode::Dense && l.ffn_down_t.data == nullptr) bytes += derived_down_t_bytes(l);
  return bytes;
}

// A dense mixture reads a chosen expert whole: each neuron's probability is its expert's share
// of the tokens, from a profile the most active of its neurons (a SwiGLU neuron is non-zero for
// every token that chose its expert), else the router's even share (`routed`).
void add_expert_shares(LayerInventory& li, const InventoryRequest& r, size_t l, double routed,
                       size_t ff) {
  const ActivationCounts* p = r.profile;
  if (p == nullptr) {
    li.activation.assign(static_cast<size_t>(li.n_neurons), routed);
    return;
  }
  if (p->counts.size() <= l || static_cast<int64_t>(p->counts[l].size()) != li.n_neurons)
    fail("the profile has {} layers of {} neurons, the model {} of {}", p->counts.size(),
         p->counts.empty() ? 0 : p->counts[0].size(), l + 1, li.n_neurons);
  const double tokens = static_cast<double>(std::max<uint64_t>(1, p->tokens));
  const std::vector<uint32_t>& counts = p->counts[l];
  for (size_t start = 0; start < counts.size(); start += ff) {
    const uint32_t most = *std::max_element(counts.begin() + static_cast<long>(start),
                                            counts.begin() + static_cast<long>(start + ff));
    li.activation.insert(li.activation.end(), ff, std::min(1.0, most / tokens));
  }
}

// `routed`: the share of a mixture's experts a token chooses (1 for a dense FFN), the first
// selection before the neurons' own; `expert_neurons`: a mixture's n_ff (0: none).
void add_activations(LayerInventory& li, const InventoryRequest& r, size_t l, double routed,
                     int64_t expert_neurons) {
  if (r.mode == FfnMode::Dense && expert_neurons > 0) {
    add_expert_shares(li, r, l, routed, static_cast<size_t>(expert_neurons));
    return;
  }
  if (r.mode == FfnMode::Dense) {
    li.activation.assign(static_cast<size_t>(li.n_neurons), 1.0);
    return;
  }
  if (r.profile == nullptr) {
    li.activation.assign(static_cast<size_t>(li.n_neurons), kUnprofiledActivation * routed);
    return;
  }
  const ActivationCounts& p = *r.profile;
  if (p.counts.size() <= l || static_cast<int64_t>(p.counts[l].size()) != li.n_neurons)
    fail("the profile has {} layers of {} neurons, the model {} of {}", p.counts.size(),
         p.counts.empty() ? 0 : p.counts[0].size(), l + 1, li.n_neurons);
  const double tokens = static_cast<double>(std::max<uint64_t>(1, p.tokens));
  for (uint32_t c : p.counts[l]) li.activation.push_back(std::min(1.0, c / tokens));
  if (l < p.window_reuse.size()) li.window_hit_rate = p.window_reuse[l];
}

// Whether a layer matrix or predictor is F32, F16 or BF16 (its batched products keep float
// forms).
bool has_float_matrices(const ModelWeights& w) {
  const auto is_float = [](const MatrixView& m) { return m.data != nullptr && is_float_type(m.type); };
  for (const auto& layer : w.layers) {
    if (is_float(layer.predictor.fc1) || is_float(layer.predictor.fc2)) return true;
    for (const auto& slot : kLayerMatrixSlots)
      if (is_float(layer.*slot.member)) return true;
  }
  return false;
}

// Host memory a session holds beyond its workspace and KV cache: the CPU backend's prepared
// inputs and axpy scratch, the logits, and for a bundled model the caches' and store's lists.
uint64_t session_host_bytes(const Model& model, const InventoryRequest& r) {
  const ModelConfig& c = model.config;
  // The CPU backend's scratch is for one product: a dense mixture's is one expert's.
  const int64_t neurons = r.mode == FfnMode::Dense ? c.n_ff : c.ffn_neurons();
  const int64_t widest = std::max({c.n_embd, neurons, c.n_head * c.head_dim});
  uint64_t bytes = CpuBackend::scratch_bytes(r.max_batch, widest, neurons, c.n_embd, r.threads,
                                             has_float_matrices(model.weights));
  bytes += static_cast<uint64_t>(std::max<int64_t>(1, r.logits_rows) * c.n_vocab) * sizeof(float);
  // Column products from flash (ColumnProducts): a later pass's sums, the values in the passes'
  // order, and per column its position, id and slot.
  if (model.weights.column_bundled) {
    const auto widest_input = static_cast<uint64_t>(std::max(c.n_ff, c.n_embd));
    bytes += static_cast<uint64_t>(r.max_batch * std::max(2 * c.n_ff, c.n_embd)) *
                 sizeof(float) +
             static_cast<uint64_t>(r.max_batch) * widest_input * sizeof(float) +
             widest_input * (sizeof(int64_t) + 2 * sizeof(int32_t));
  }
  if (model.weights.bundled)
    bytes += static_cast<uint64_t>(c.n_layer) * NeuronCache::bookkeeping_bytes(neurons, neurons) +
             FlashFfnStore::bookkeeping_bytes(neurons, r.max_batch);
  // Look-ahead's predictor buffers (taken whether or not the run reads ahead).
  if (model.weights.bundled && r.mode == FfnMode::Predict)
    bytes += FfnExecutor::lookahead_bytes(model, r.max_batch);
  return bytes;
}

}  // namespace

Inventory take_inventory(const Model& model, const InventoryRequest& r) {
  const ModelWeights& w = model.weights;
  const ModelConfig& c = model.config;
  Inventory inv;
  inv.bundled = w.bundled;
  inv.column_bundled = w.column_bundled;
  inv.flash_route = flash_route(c, w.has_predictors);
  inv.input_columns = r.input_columns;
  inv.sparse = r.mode != FfnMode::Dense;
  inv.kv_sequences = r.n_seq;
  inv.embd_bytes = static_cast<uint64_t>(c.n_embd) * sizeof(float);
  // Today's smallest cache that decodes: a pass holds at least this many neurons.
  const int64_t neurons = c.ffn_neurons();
  inv.min_cache_slots = std::min<int64_t>(neurons, std::max<int64_t>(64, neurons / 8));
  inv.expert_neurons = c.moe() ? c.n_ff : 0;
  const uint64_t kv_layer = Session::kv_cache_bytes(c, r.n_ctx * r.n_seq, r.kv.k, r.kv.v) /
                            static_cast<uint64_t>(c.n_layer);
  uint64_t placed = 0;  // bytes of the resident file copy that the layers and output account for
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    LayerInventory li;
    // The attention's matrices and every vector (norms and biases stay with the dense blocks).
    li.dense_bytes = 0;
    for (const LayerMatrixSlot& m : kLayerMatrixSlots)
      if (m.block == LayerBlock::Attention) li.dense_bytes += (lw.*m.member).bytes();
    for (const std::vector<float>& v : lw.vectors) li.dense_bytes += norm_bytes(v);
    // A mixture's router and shared expert, read whole every token.
    li.dense_bytes += lw.ffn_gate_inp.bytes() + shared_expert_bytes(lw);
    if (r.mode == FfnMode::Predict)
      li.dense_bytes += lw.predictor.fc1.bytes() + lw.predictor.fc2.bytes();
    li.kv_bytes = kv_layer;
    li.n_neurons = c.ffn_neurons();
    li.neuron_bytes = neuron_read_bytes(w, lw, r.mode);
    if (w.bundled) li.vram_neuron_bytes = w.bundle.payload_bytes();
    li.ffn_ram_bytes = w.bundled ? 0 : ffn_ram_bytes(lw, r.mode);
    add_activations(li, r, l, c.moe() ? static_cast<double>(c.n_expert_used) / c.n_expert : 1.0,
                    inv.expert_neurons);
    placed += li.dense_bytes + (w.bundled ? 0 : li.ffn_ram_bytes);
    inv.layers.push_back(std::move(li));
  }
  inv.output_bytes = w.output.bytes() + norm_bytes(w.output_norm) + norm_bytes(w.output_norm_bias);
  placed += w.output.bytes();
  // The rest of the resident copy (embedding table, predictors outside predict mode, metadata,
  // alignment) and the buffers, whatever the plan. Derived ffn_down_t is in ffn_ram_bytes.
  uint64_t resident = model.file->file_size();
  for (const auto& [offset, bytes] : model.flash_ranges()) resident -= bytes;
  uint64_t derived = 0;
  for (const LayerWeights& lw : w.layers)
    if (!w.bundled && r.mode != FfnMode::Dense && lw.ffn_down_t.data == nullptr)
      derived += derived_down_t_bytes(lw);
  // Input-sparse products' column copies (and a ffn_down_t made for them): held beside the rows,
  // which decode reads instead of them (the per-token figures keep the rows' bytes).
  if (r.input_columns && model.columns.empty())
    for (const LayerWeights& lw : w.layers) derived += Model::input_column_bytes(lw);
  // LoRA adapters (f32, beside the weights) and their products' buffers.
  derived += model.lora.bytes() +
             LoraProducts::scratch_bytes(model.lora, r.max_batch > 0 ? r.max_batch
                                                                     : Session::kMaxBatch);
  inv.workspace_bytes =
      Session::workspace_bytes(model, r.n_ctx, r.mode, r.input_columns, false, r.max_batch);
  inv.host_workspace_bytes =
      Session::workspace_bytes(model, r.n_ctx, r.mode, r.input_columns, /*on_cpu=*/true,
                               r.max_batch);
  const uint64_t rest = resident + derived > placed ? resident + derived - placed : 0;
  // A bundled model reads its embedding a row per token into a one-row buffer: a row and a
  // page stay planned as slack for it (and, with --mmap, for the pages a row touches).
  const uint64_t embedding_slack =
      w.bundled && w.token_embd.data != w.output.data ? w.token_embd.row_bytes + (8ull << 10) : 0;
  inv.host_scratch_bytes = session_host_bytes(model, r) + kProcessSlackBytes + r.front_end_bytes;
  inv.fixed_ram_bytes = rest + inv.host_workspace_bytes + inv.host_scratch_bytes + embedding_slack;
  return inv;
}

}  // namespace strata
