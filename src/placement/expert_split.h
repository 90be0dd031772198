// A dense mixture's split between a GPU and the CPU (KTransformers'): a chosen expert is read
// whole, so the unit is an expert, and the plan's VRAM ids are every neuron of the device's
// experts (expert e's neuron i is e * n_ff + i, inv.expert_neurons = n_ff). Dense blocks go to
// the GPU first (the output head, then every layer's attention, leaving the first layers on the
// CPU while they do not fit), then experts by their share of the tokens (the inventory's
// activation: a profile's, else the router's even share), hottest first, while the budget holds.
// Ties go to the lower expert id, then the lower layer, so with even shares every layer gets an
// expert before any gets a second. A pure function; fails with a one-line message when not one
// layer's attention fits.
#pragma once

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

PlacementPlan plan_expert_split(const Inventory& inv, const Budgets& budgets,
                                const CostModel& cost);

}  // namespace strata
