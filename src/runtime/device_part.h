// One device's share of a session: its backend and what the layers it computes keep in that
// backend's memory (scratch, the prepared input, resident weights, the KV cache of its layers),
// the FFN executor that runs there and its per-layer counters. A session has a part for its own
// backend and, beside a device, one for the CPU (the plan's layers or output head there, or a
// split FFN's RAM part); which part computes a layer is the session's layer->part map.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "model/model.h"
#include "runtime/ffn_mode.h"
#include "runtime/forward_stats.h"
#include "runtime/column_products.h"
#include "runtime/input_sparsifier.h"
#include "runtime/workspace.h"
#include "tiers/ffn_store.h"

namespace strata {

class FfnExecutor;
class KvCache;
class ResidentWeights;

// What a part holds for a model of n_layer layers.
struct PartLayout {
  std::vector<uint8_t> layers;  // per layer: 1 where this part computes it (its KV cache here)
  bool output = true;           // the output head
  // False: a split FFN's device holds no FFN matrices (its store copies the hot rows).
  bool ffn_rows = true;
  // A dense mixture split by expert: per layer, 1 for each expert this part holds (empty: all).
  std::vector<std::vector<uint8_t>> experts_held;
  bool columns = false;      // TEAL's column copies of its layers (Model::columns)
  int64_t kv_positions = 0;  // per layer, all sequences
  DType k_type = DType::F32, v_type = DType::F32;
};

class DevicePart {
 public:
  // Uploads what the layout names (on the host: views of the model, nothing copied). Fails with
  // a one-line message naming the allocation that does not fit.
  DevicePart(const Model& model, Backend& backend, FfnMode mode, const PartLayout& layout,
             const WorkspaceShape& shape, int64_t max_batch);
  ~DevicePart();
  DevicePart(const DevicePart&) = delete;
  DevicePart& operator=(const DevicePart&) = delete;

  // A store over this part's own FFN rows (the model's matrices on the host, their copies on a
  // device), for the executor or for a split FFN's part below the device.
  FfnStore& ram_store();
  // The FFN executor over `store` (null in dense mode); once, after the store is known.
  void make_ffn(FfnStore* store, bool check_predictor);

  bool computes(int64_t layer) const { return layout_.layers[static_cast<size_t>(layer)] != 0; }
  bool has_output() const { return layout_.output; }
  KvLayer kv_layer(int64_t layer) const;  // a layer it computes
  uint64_t kv_bytes() const;
  // Positions [from, from + n) of every layer's keys and values copied to [to, to + n).
  void copy_kv_rows(int64_t from, int64_t to, int64_t n);
  // Per layer: the FFN's non-zero activations, then the values each sparsity point kept.
  uint64_t* counter(int64_t layer) {
    return reinterpret_cast<uint64_t*>(counters_.data) + layer * kCountersPerLayer;
  }
  uint64_t* sparsity_counters(int64_t layer) { return counter(layer) + 1; }
  // Adds this pass's counts to `stats` and the sparsifier's and sets the counters back to 0.
  void collect_counts(std::vector<FfnLayerStats>& stats, InputSparsifier& sparsifier);
  static constexpr int64_t kCountersPerLayer = 1 + kSparsityPoints;

  Backend& backend;

 private:
  // First, so that the largest allocation (the cache, with -c) is the one a failure names.
  PartLayout layout_;
  std::unique_ptr<KvCache> kv_;    // null: no layer computes here
  std::vector<int64_t> kv_index_;  // per model layer: its index in kv_

 public:
  Workspace ws;
  std::unique_ptr<PreparedRows> in;
  std::unique_ptr<ResidentWeights> weights;
  std::unique_ptr<FfnExecutor> ffn;
  std::unique_ptr<ColumnProducts> columns;  // input-sparse products (made by the session)

 private:
  std::vector<RamFfnLayer> ram_layers_;
  std::unique_ptr<FfnStore> ram_store_;
  const Model& model_;
  FfnMode mode_;
  Buffer counters_;  // [n_layer][kCountersPerLayer] in the part's memory
  std::vector<uint64_t> counts_;
};

}  // namespace strata
