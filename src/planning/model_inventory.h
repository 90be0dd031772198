// The placement inventory of a loaded model for a run: sizes from the code that allocates them
// (the weights' views, KvCache::bytes, Workspace::bytes, the ranges Model::load leaves on
// flash), activation frequencies from a profile.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "placement/inventory.h"
#include "runtime/ffn_mode.h"
#include "runtime/kv_cache.h"

namespace strata {

// A profile's counts (offline/profile.h reads them from a file).
struct ActivationCounts {
  uint64_t tokens = 0;
  std::vector<std::vector<uint32_t>> counts;  // [layer][n_ff]
  std::vector<double> window_reuse;           // [layer], may be empty
  // What was counted: Dense, the activations that fire; Predict, the predictor's selections.
  FfnMode mode = FfnMode::Dense;
  // The first tokens' own selections in order, bit-packed ([layer][token * row + i / 8], bit
  // i % 8; row = (n_ff + 7) / 8): what the flash tier's caches are replayed over
  // (planning/plan_replay.h). Empty in profiles written before they were recorded.
  std::vector<std::vector<uint8_t>> selections;
  uint64_t selected_tokens = 0;
};

struct InventoryRequest {
  int64_t n_ctx = 0;
  FfnMode mode = FfnMode::Dense;
  KvTypes kv{};
  const ActivationCounts* profile = nullptr;  // null: every neuron equally likely
  int64_t logits_rows = 1;  // rows of logits a call returns (all_logits: the tokens of a call)
  int n_seq = 1;            // sequences of n_ctx positions each in the KV cache (server slots)
  // RAM the front end holds beside the session (the server's request memory, connection
  // buffers and worker stacks: server/http_server.h's server_ram_bytes).
  uint64_t front_end_bytes = 0;
  // TEAL's input-sparse products: the column copies Model::ensure_input_columns makes and the
  // workspace's column buffers.
  bool input_columns = false;
  int threads = 1;  // the CPU's pool: each thread keeps its own scratch
  int64_t max_batch = 64;  // tokens per batch (Session::kMaxBatch unless the plan chose more)
};

// Without a profile a neuron of a sparse FFN counts as firing for this share of tokens.
inline constexpr double kUnprofiledActivation = 0.1;
// RAM for the process itself (code, libraries, allocator slack), outside any buffer.
inline constexpr uint64_t kProcessSlackBytes = uint64_t{16} << 20;

Inventory take_inventory(const Model& model, const InventoryRequest& request);

}  // namespace strata
