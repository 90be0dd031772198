// The placement solver a run uses, chosen from its request: the ILP when a profile says which
// neurons are hot and there is a choice to make (a bundled model, or VRAM), else the greedy
// rule; with what runs need of a plan (a layer's neurons in VRAM only with its attention,
// since a layer on the CPU computes wholly there; nothing pinned without a profile). A dense
// mixture beside a GPU places whole experts (placement/expert_split.h).
#pragma once

#include "placement/plan.h"
#include "planning/planned_session.h"

namespace strata {

PlacementPlan solve_run(const Inventory& inv, const RunRequest& r, bool bundled);

}  // namespace strata
