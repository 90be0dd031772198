// A run's planning on a device (a GPU, or the reference device): the facts the device decision
// needs (runtime/device_choice.h), then the plan it calls for (the whole model, the last -ngl
// layers, a split solved on what the budget leaves after the session's own buffers, or a saved
// plan checked against the budget) and the session options that apply it. make_plan
// (planned_session.cpp) calls it when a run asks for a GPU.
#pragma once

#include <cstdint>

#include "placement/plan.h"
#include "runtime/planned_session.h"

namespace strata {

// Plans `run` on a device when the device decision gives one (true); false: the run computes
// on the CPU (run.device and run.notes say why) and the caller plans it. May set the cost
// model's VRAM speed in `r` (a GPU's measured peak).
bool plan_on_device(const Model& model, RunRequest& r, PlannedRun& run);

// What a device session holds beyond what the inventory places (dense blocks, KV caches,
// output, workspace): the backend's own buffers, the logits, counters and a split's slots.
uint64_t bytes_beside_the_plan(const Model& model, const Inventory& inv, DeviceKind kind);

// Whether a plan puts anything on a GPU.
bool uses_device(const PlacementPlan& plan);

// A layer whose attention the plan leaves on the CPU computes wholly there (attention, KV
// cache, predictor, FFN): its neurons leave VRAM (the budget they held stays unused).
void cpu_layers_whole(PlacementPlan& plan);

}  // namespace strata
