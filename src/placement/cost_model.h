// The cost model: what a plan costs per token on the machine a CostModel describes, evaluated
// neuron by neuron. Per layer: the dense blocks on their device; the FFN's GPU part and CPU
// part run at the same time, so the layer takes the longer of the two, plus a synchronisation
// (and the partial sum over the host link) when it uses both devices. A neuron costs its
// activation probability times its bytes over its tier's bandwidth; the flash neurons of a layer
// also their misses in the window cache (window_misses).
#pragma once

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

// Misses per token of a layer's window cache: `demand` = expected uses per token of the neurons
// it serves (sum of p over the flash neurons), `room` = its slots beyond the pinned ones, h = the
// layer's window hit rate. Reuse needs room for a token's own neurons first: with room equal to
// the demand nothing stays for the next token (every use misses); from there the reuse caught
// grows with the room until, at kRoomForFullReuse x demand, the share (1 - h) of uses that were
// not used in the window before are the only misses:
//   misses = max((1 - h) d, d - h (room - d) / (kRoomForFullReuse - 1))
// Convex in (room, d), so the ILP takes it as two rows. Below room = d it overstates the misses
// (a layer that short re-reads within a token), which keeps plans away from there. Checked on
// the 7B flash benchmark (docs/PLACEMENT.md): the plan it gives reads what the best fixed pin
// share reads.
inline constexpr double kRoomForFullReuse = 1.5;
double window_misses(double demand, double room, double h);

// Bytes a layer's dense blocks read per token: their weights and, on average, half of one
// sequence's KV cache (inv.kv_sequences share the layer's kv_bytes).
double attention_bytes(const Inventory& inv, const LayerInventory& l);
double bandwidth(const CostModel& c, Device d);  // of the device's memory
// A layer that uses both devices: the synchronisation and its partial sum both ways over the link.
double sync_seconds(const Inventory& inv, const CostModel& c);
inline double link_bytes(const Inventory& inv) {
  return 2.0 * static_cast<double>(inv.embd_bytes);
}

struct LayerCost {
  double attention_s = 0, gpu_ffn_s = 0, cpu_ffn_s = 0, sync_s = 0;
  double seconds() const;
};

// Per-layer costs and the whole prediction (held bytes included).
LayerCost layer_cost(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost,
                     int64_t layer, PlanPrediction* totals);
// The bytes each tier holds (ram_bytes, vram_bytes of `t`), without the per-token figures.
void held_bytes(const PlacementPlan& plan, const Inventory& inv, PlanPrediction& t);
PlanPrediction evaluate(const PlacementPlan& plan, const Inventory& inv, const CostModel& cost);
// A CPU-only plan's seconds per token had RAM been read at `measured` bytes/s instead of the
// `assumed` rate it was planned with (every RAM byte costs 1/rate there, so the change is
// exact): what a run that measured its rate predicts.
double seconds_at_ram_rate(const PlanPrediction& p, double assumed, double measured);

// Fails with a one-line message when the plan holds more than a budget allows (the usable RAM
// is the budget less kRamReserve of it).
void check_budgets(const PlacementPlan& plan, const Inventory& inv);
// A thirty-second of the RAM budget stays unplanned: the page tables and the page cache a memory
// cgroup charges to the process (~0.14 GB of file pages at 7B). Planned without it, a 6.3 GiB
// cgroup filled up and its reclaim slowed decode.
uint64_t usable_ram(uint64_t budget);

}  // namespace strata
