// A run's planning on a device (a GPU, or the reference device): the facts the device decision
// needs (planning/device_choice.h), then the plan it calls for (the whole model, the last -ngl
// layers, a split solved on what the budget leaves after the session's own buffers, or a saved
// plan checked against the budget) and the session options that apply it. make_plan
// (planned_session.cpp) calls it when a run asks for a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "placement/plan.h"
#include "planning/planned_session.h"

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

// Per layer 1 where a matrix of the layer (dense blocks, FFN, experts) has a type the device's
// kernels do not read (`reads`: the accelerator's answer), else 0; `types` names those types.
std::vector<uint8_t> declined_layers(const ModelWeights& weights,
                                     const std::function<bool(DType)>& reads,
                                     std::vector<std::string>* types = nullptr);

// Per layer 1 where the layer needs an op of its recipe (model/layer_ops.h) the device lacks
// (`supports`: the accelerator's answer), else 0; `ops` names those ops.
std::vector<uint8_t> layers_needing_what_it_lacks(const ModelConfig& config,
                                                  const std::function<bool(LayerOp)>& supports,
                                                  std::vector<std::string>* ops = nullptr);

// The declined layers computed wholly on the CPU (attention, KV cache, FFN); the output head
// too when `output_declined`. Returns whether the plan changed.
bool keep_declined_on_host(PlacementPlan& plan, const std::vector<uint8_t>& declined,
                           bool output_declined);

}  // namespace strata
