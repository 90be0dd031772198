// A placement plan as plain data: for every layer where its dense blocks run and where each of
// its FFN neurons lives, the KV cache's and output head's device, the flash tier's cache slots,
// the budgets it was made for and what the cost model predicts. Solvers (greedy.h, ilp.h) make
// plans; planning/planned_session.h applies one; `strata plan` prints and saves them.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "placement/inventory.h"
#include "tensor/device.h"

namespace strata {

// Where one neuron lives.
enum class Tier : uint8_t {
  Vram,       // in the GPU's memory, computed there
  RamPinned,  // bundled models: kept in the layer's RAM cache whatever the window
  Ram,        // in RAM (the model's matrices; bundled: in the window cache when recently used)
  Flash,      // bundled: on flash, read into the window cache on demand
};

struct LayerPlan {
  Device attention = Device::Host;  // attention, norms and the predictor
  std::vector<int32_t> vram;        // neuron ids in VRAM, ascending
  std::vector<int32_t> pinned;      // bundled: ids pinned in the RAM cache, ascending
  int64_t cache_slots = 0;          // bundled: the RAM cache's slots (pinned ones included)
};

// What the cost model expects of a plan, per token (placement/cost_model.h).
struct PlanPrediction {
  double seconds_per_token = 0;
  double vram_bytes_per_token = 0, ram_bytes_per_token = 0, flash_bytes_per_token = 0;
  double link_bytes_per_token = 0;
  uint64_t vram_bytes = 0, ram_bytes = 0;  // held
  double tokens_per_s() const { return seconds_per_token > 0 ? 1.0 / seconds_per_token : 0.0; }
};

struct PlacementPlan {
  std::string solver;  // "greedy", "ilp"
  std::string status;  // ilp: "optimal", "time limit, best found", "LP relaxation, rounded"
  // ilp: a lower bound on any plan's seconds per token under the cost model (the LP
  // relaxation's), so predicted / bound - 1 bounds how far from optimal the plan can be.
  double lower_bound_s = 0;
  Budgets budgets;
  CostModel costs;
  Device output = Device::Host;
  bool bundled = false;
  std::vector<LayerPlan> layers;
  // Column-bundled models: the share of each layer's column bundles the RAM caches hold and
  // their bytes (placement/column_cache.h); 0 bytes otherwise.
  double column_share = 1.0;
  uint64_t column_cache_bytes = 0;
  PlanPrediction predicted;

  // The tier of neuron `id` of layer `l`.
  Tier tier(int64_t l, int32_t id) const;
};

nlohmann::json plan_to_json(const PlacementPlan& plan);
// Fails with a one-line message naming what is wrong (missing fields, ids out of range).
PlacementPlan plan_from_json(const nlohmann::json& j, const Inventory& inventory);
// A mixture's residency: how many of `ids` (a layer's neuron ids, ascending) belong to each of
// its n_neurons / expert_neurons experts.
std::vector<int64_t> neurons_per_expert(std::span<const int32_t> ids, int64_t expert_neurons,
                                        int64_t n_neurons);
// A dense mixture split by expert: layer `layer`'s device ids as whole experts, 1 for each
// expert all of whose neurons are among them. Fails naming an expert they cut (the dense mixture
// computes an expert whole, on one device).
std::vector<uint8_t> whole_experts(std::span<const int32_t> ids, int64_t expert_neurons,
                                   int64_t n_neurons, int64_t layer);
// "4.55 GiB", "12.3 MiB": sizes in plans and in their errors.
std::string size_text(double bytes);
// "plan (ilp): 22 layers; VRAM 0 B; RAM 57.3 MiB (pinned 1200 neurons, cache 64..200 slots);
// flash 320 MiB; predicted 41.2 tok/s". The speed is left out where the caller has not measured
// this machine's memory (a plain run: the assumed rate can be a third off).
enum class PredictionShown { Yes, No };
std::string plan_summary(const PlacementPlan& plan, const Inventory& inventory,
                         PredictionShown prediction = PredictionShown::Yes);
// A self-contained HTML page: per layer a bar of its neurons by tier, and the totals.
std::string plan_report_html(const PlacementPlan& plan, const Inventory& inventory,
                             const std::string& model_name);

}  // namespace strata
