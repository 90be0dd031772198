// The files that give the placement solver its numbers, on arbitrary bytes: a saved plan
// (strata plan -o), a storage profile (strata probe-storage) and an activation profile sidecar
// (strata profile, GGUF). The first byte picks the reader. Each is accepted or refused with
// strata::Error; what is accepted goes on to the cost model and, for a profile, the ILP over a
// small inventory made from it. A crash, an abort (GLPK aborts on a non-finite coefficient),
// a hang or a sanitizer report is a failure.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json_limits.h"
#include "fuzz_util.h"
#include "offline/profile.h"
#include "placement/cost_model.h"
#include "placement/plan.h"
#include "placement/solver.h"
#include "tiers/storage_profile.h"

namespace {

// Two layers of 16 neurons, bundled or in RAM, with every fixed part small.
strata::Inventory small_inventory(bool bundled, size_t layers, size_t neurons) {
  strata::Inventory inv;
  inv.bundled = bundled;
  inv.embd_bytes = 256;
  inv.min_cache_slots = 4;
  inv.output_bytes = 1 << 16;
  inv.workspace_bytes = 1 << 14;
  inv.fixed_ram_bytes = 1 << 16;
  for (size_t l = 0; l < layers; ++l) {
    strata::LayerInventory li;
    li.dense_bytes = 1 << 16;
    li.kv_bytes = 1 << 12;
    li.neuron_bytes = 1024;
    li.n_neurons = static_cast<int64_t>(neurons);
    li.ffn_ram_bytes = neurons * 1024;
    li.activation.assign(neurons, 0.25);
    inv.layers.push_back(std::move(li));
  }
  return inv;
}

void plan_file(std::string_view text, bool bundled) {
  const strata::Inventory inv = small_inventory(bundled, 2, 16);
  const strata::PlacementPlan p =
      strata::plan_from_json(strata::parse_json_bounded(text, "plan"), inv);
  strata::evaluate(p, inv, strata::CostModel{});
}

void profile_file(const uint8_t* data, size_t size) {
  const strata::fuzz::MemFile file(data, size);
  const strata::NeuronProfile p = strata::read_profile(file.path());
  // The ILP over what the profile says, when it is small enough to solve quickly.
  if (p.counts.empty() || p.counts.size() > 4) return;
  const size_t neurons = p.counts[0].size();
  if (neurons == 0 || neurons > 64) return;
  for (const auto& c : p.counts)
    if (c.size() != neurons) return;
  strata::Inventory inv = small_inventory(true, p.counts.size(), neurons);
  for (size_t l = 0; l < p.counts.size(); ++l) {
    for (size_t i = 0; i < neurons; ++i)
      inv.layers[l].activation[i] =
          std::min(1.0, static_cast<double>(p.counts[l][i]) / static_cast<double>(p.tokens));
    if (l < p.window_reuse.size()) inv.layers[l].window_hit_rate = p.window_reuse[l];
  }
  strata::SolverOptions o;
  o.time_limit_s = 0.2;
  strata::plan_ilp(inv, strata::Budgets{uint64_t{1} << 22, 0}, strata::CostModel{}, o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0:
      case 1:
        plan_file(rest, data[0] % 4 == 1);
        break;
      case 2:
        strata::StorageProfile::from_json(rest, "fuzz");
        break;
      default:
        profile_file(data + 1, size - 1);
    }
  } catch (const strata::Error&) {
    // refused with a message: fine
  } catch (const nlohmann::json::exception&) {
    // a plan that is not JSON at all: the CLI reports it (ffn_flags.cpp)
  }
  return 0;
}
