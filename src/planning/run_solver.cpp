#include "planning/run_solver.h"

#include "core/error.h"
#include "placement/expert_split.h"
#include "placement/solver.h"

namespace strata {

namespace {

SolverChoice resolve_solver(const RunRequest& r, bool bundled) {
  if (r.solver != SolverChoice::Auto) return r.solver;
  const bool choice = bundled || r.budgets.vram > 0;
  return r.profile != nullptr && choice && r.mode != FfnMode::Dense ? SolverChoice::Ilp
                                                                    : SolverChoice::Greedy;
}

}  // namespace

PlacementPlan solve_run(const Inventory& inv, const RunRequest& r, bool bundled) {
  // A dense mixture beside a GPU: whole experts (placement/expert_split.h).
  if (inv.expert_neurons > 0 && r.mode == FfnMode::Dense && !bundled && r.budgets.vram > 0) {
    if (r.solver == SolverChoice::Ilp)
      fail("--solver ilp places neurons; a dense mixture's GPU split places whole experts");
    return plan_expert_split(inv, r.budgets, r.costs);
  }
  SolverOptions so = r.solver_options;
  so.neurons_with_attention = true;
  // Without a profile nothing is known to be hot: the greedy rule pins nothing.
  if (r.profile == nullptr) so.pin_share = 0;
  switch (resolve_solver(r, bundled)) {
    case SolverChoice::Ilp:
      if (r.profile == nullptr && r.mode != FfnMode::Dense)
        fail("--solver ilp needs --profile (which neurons are hot)");
      return plan_ilp(inv, r.budgets, r.costs, so);
    default:
      return plan_greedy(inv, r.budgets, r.costs, so);
  }
}

}  // namespace strata
