#include "planning/shared_budgets.h"

#include "core/error.h"

namespace strata {
namespace {

uint64_t left_beside(uint64_t budget, uint64_t held, std::string_view held_by,
                     std::string_view flag) {
  if (budget == 0) return 0;
  if (held >= budget)
    fail("{} holds {} of the {} {}: nothing is left for the model", held_by,
         size_text(static_cast<double>(held)), size_text(static_cast<double>(budget)), flag);
  return budget - held;
}

}  // namespace

Budgets budgets_beside(const Budgets& total, const PlanPrediction& held, std::string_view held_by) {
  return {left_beside(total.ram, held.ram_bytes, held_by, "--ram-budget"),
          left_beside(total.vram, held.vram_bytes, held_by, "--vram-budget")};
}

}  // namespace strata
