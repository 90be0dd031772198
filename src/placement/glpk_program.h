// A GLPK problem built row by row: columns with bounds, kinds and costs, rows as lists of
// (column, coefficient) terms, loaded as one sparse matrix (1-based, as GLPK wants). Minimises.
// Every number is checked finite on the way in: GLPK aborts the process on a NaN or an
// infinity (bounds of +inf mean "none" and are not passed to it); the inputs are range-checked
// where they are read, so this is the last line, naming what went wrong instead of SIGABRT.
// Internal to the placement solvers (src/placement/ilp.cpp).
#pragma once

#include <glpk.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"

namespace strata {

class Program {
 public:
  Program() : lp_(glp_create_prob()) { glp_set_obj_dir(lp_, GLP_MIN); }
  ~Program() { glp_delete_prob(lp_); }
  glp_prob* get() { return lp_; }

  int column(double lo, double hi, int kind, double cost) {
    finite(lo, "a column's lower bound");
    if (!std::isinf(hi) || hi < 0) finite(hi, "a column's upper bound");
    finite(cost, "a cost");
    const int j = glp_add_cols(lp_, 1);
    glp_set_col_bnds(lp_, j, lo == hi ? GLP_FX : (std::isinf(hi) ? GLP_LO : GLP_DB), lo,
                     std::isinf(hi) ? 0.0 : hi);
    glp_set_col_kind(lp_, j, kind);
    glp_set_obj_coef(lp_, j, cost);
    return j;
  }
  // sum coef * x  (>= lo when upper is false, <= bound otherwise)
  int row(const std::vector<std::pair<int, double>>& terms, double bound, bool upper) {
    finite(bound, "a constraint's bound");
    const int i = glp_add_rows(lp_, 1);
    glp_set_row_bnds(lp_, i, upper ? GLP_UP : GLP_LO, upper ? 0.0 : bound, upper ? bound : 0.0);
    for (const auto& [j, a] : terms) {
      // Terms below 1e-9 (microseconds or MiB per neuron) are noise to GLPK's tolerances.
      finite(a, "a constraint's coefficient");
      if (std::abs(a) < 1e-9 || j == 0) continue;
      ia_.push_back(i);
      ja_.push_back(j);
      ar_.push_back(a);
    }
    return i;
  }
  void constant(double c) {
    finite(c, "the objective's constant");
    glp_set_obj_coef(lp_, 0, c);
  }
  void load() {
    glp_load_matrix(lp_, static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data());
  }

 private:
  static void finite(double v, const char* what) {
    if (!std::isfinite(v))
      fail("placement: {} is {} (a profile, plan or storage measurement out of range)", what, v);
  }

  glp_prob* lp_;
  std::vector<int> ia_{0}, ja_{0};
  std::vector<double> ar_{0.0};
};

}  // namespace strata
