// Two runs in one process under one set of budgets (a draft model beside its target model, for
// speculative decoding): the first is planned inside the budgets, the second inside what it
// leaves. A budget of 0 (none given) stays none.
#pragma once

#include <string_view>

#include "placement/inventory.h"
#include "placement/plan.h"

namespace strata {

// The budgets less what a plan holds (`held`, from its prediction); fails naming `held_by` when
// it holds a whole budget.
Budgets budgets_beside(const Budgets& total, const PlanPrediction& held, std::string_view held_by);

}  // namespace strata
