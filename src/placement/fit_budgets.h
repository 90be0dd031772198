// Bringing a plan within its budgets (a rounded solution of the placement program may hold a
// little more than they allow): off the GPU first the output head, then attention blocks from
// the last layer, then the coldest VRAM neurons; in RAM the caches shrink to their minimum,
// then the coldest pinned neurons go. A plan within its budgets is left as it is.
#pragma once

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

void fit_within_budgets(PlacementPlan& plan, const Inventory& inventory);

}  // namespace strata
