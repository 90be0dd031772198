// The placement ILP (GLPK). Each layer's neurons, sorted hottest first, are cut into groups;
// a group's variables are how many of its neurons go to VRAM (v) and, for bundled models, how
// many are pinned in RAM (r); the rest stay in RAM (a model in RAM) or on flash behind the
// window cache. Sorted groups make each layer's activation mass concave in the count placed,
// so placing counts (the hottest of a group first) loses little against placing neurons, and
// the program stays small: 40 layers x 48 groups x 2 variables at 13B. The greedy rule's
// boundaries are group boundaries, so its plan is a solution whose modelled cost is exact, and
// the optimum is never worse than it under the cost model.
//
// Per layer l (seconds, the cost model's terms; p = mean activation, w = mean window share,
// b = neuron bytes, R/V = RAM/VRAM bandwidth, F = one flash read, h = window hit rate):
//   G_l = sum_g v_lg p b / V                                      (the GPU's FFN share)
//   C_l = sum_g (n_g - v_lg - r_lg) p (b/R + (1-h) F) + r_lg p b/R + h q F short_l   (bundled)
//       = sum_g (n_g - v_lg) p b / R                                                 (in RAM)
//   short_l >= sum_g (n_g - v_lg - r_lg) w - room_l               (working set beyond the room)
//   t_l >= A_l + G_l + sigma s_l,  t_l >= A_l + C_l + sigma s_l   (both devices at once)
//   A_l = attention on the host or, a_l = 1, on the GPU; s_l = 1 when the layer uses both
//   (s >= a + c - 1, s >= u - a; u: any VRAM neuron, c: any neuron on the CPU).
// Minimise sum_l t_l + the output head's time, subject to RAM and VRAM budgets (hard),
// cache slots (room + pinned) >= the minimum, and PowerInfer's per-layer minimum if asked.
// PowerInfer's shipped ILP (maximise activation mass in VRAM under its capacity) is the case
// V -> infinity, sigma = 0, dense blocks on the host: then sum_l t_l = const - mass_gpu b / R.
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/error.h"
#include "placement/cost_model.h"
#include "placement/solver.h"

namespace strata {

namespace {

struct Group {
  int64_t begin = 0, size = 0;  // ranks in the layer's hottest-first order
  double p = 0, w = 0;          // means over the group
};

// Cuts at equal neuron counts, at equal shares of activation mass, and at `forced` ranks.
std::vector<Group> make_groups(const LayerInventory& l, const std::vector<int32_t>& order,
                               const Inventory& inv, int groups, std::vector<int64_t> cuts) {
  const int64_t n = l.n_neurons;
  auto p_of = [&](int64_t rank) {
    return inv.sparse ? l.activation[static_cast<size_t>(order[static_cast<size_t>(rank)])] : 1.0;
  };
  if (n <= groups) {
    for (int64_t k = 0; k <= n; ++k) cuts.push_back(k);
  } else {
    const int half = std::max(1, groups / 2);
    for (int k = 0; k <= half; ++k) cuts.push_back(n * k / half);
    double mass = 0;
    for (int64_t k = 0; k < n; ++k) mass += p_of(k);
    double seen = 0;
    int next = 1;
    for (int64_t k = 0; k < n && mass > 0; ++k) {
      seen += p_of(k);
      if (seen >= mass * next / half) {
        cuts.push_back(k + 1);
        ++next;
      }
    }
  }
  cuts.push_back(0);
  cuts.push_back(n);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Group> out;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    Group g{cuts[i], cuts[i + 1] - cuts[i], 0, 0};
    if (g.size <= 0 || g.begin < 0 || g.begin + g.size > n) continue;
    for (int64_t k = g.begin; k < g.begin + g.size; ++k) {
      g.p += p_of(k);
      g.w += window_share(p_of(k), inv.window);
    }
    g.p /= static_cast<double>(g.size);
    g.w /= static_cast<double>(g.size);
    out.push_back(g);
  }
  return out;
}

// A sparse constraint matrix and its rows, 1-based as GLPK wants.
class Program {
 public:
  Program() : lp_(glp_create_prob()) { glp_set_obj_dir(lp_, GLP_MIN); }
  ~Program() { glp_delete_prob(lp_); }
  glp_prob* get() { return lp_; }

  int column(double lo, double hi, int kind, double cost) {
    const int j = glp_add_cols(lp_, 1);
    glp_set_col_bnds(lp_, j, lo == hi ? GLP_FX : (std::isinf(hi) ? GLP_LO : GLP_DB), lo,
                     std::isinf(hi) ? 0.0 : hi);
    glp_set_col_kind(lp_, j, kind);
    glp_set_obj_coef(lp_, j, cost);
    return j;
  }
  // sum coef * x  (>= lo when upper is false, <= bound otherwise)
  void row(const std::vector<std::pair<int, double>>& terms, double bound, bool upper) {
    const int i = glp_add_rows(lp_, 1);
    glp_set_row_bnds(lp_, i, upper ? GLP_UP : GLP_LO, upper ? 0.0 : bound, upper ? bound : 0.0);
    for (const auto& [j, a] : terms) {
      if (a == 0 || j == 0) continue;
      ia_.push_back(i);
      ja_.push_back(j);
      ar_.push_back(a);
    }
  }
  void constant(double c) { glp_set_obj_coef(lp_, 0, c); }
  void load() { glp_load_matrix(lp_, static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data()); }

 private:
  glp_prob* lp_;
  std::vector<int> ia_{0}, ja_{0};
  std::vector<double> ar_{0.0};
};

constexpr double kMicro = 1e6;             // objective in microseconds
constexpr double kMiB = 1.0 / 1048576.0;   // budget rows in MiB
const double kInf = std::numeric_limits<double>::infinity();

struct LayerColumns {
  std::vector<int> v, r;  // per group (0: absent)
  int room = 0, shortfall = 0, t = 0, a = 0, u = 0, c = 0, s = 0;
};

struct Builder {
  const Inventory& inv;
  const Budgets& b;
  const CostModel& cost;
  const SolverOptions& o;
  std::vector<std::vector<Group>> groups;
  Program prog;
  std::vector<LayerColumns> cols;
  int output_gpu = 0, any_gpu = 0;
  bool gpu = false;

  double attention_s(size_t l, Device d) const {
    const double bytes = static_cast<double>(inv.layers[l].dense_bytes) + 0.5 * inv.layers[l].kv_bytes;
    return bytes / (d == Device::Cuda ? cost.vram_bytes_per_s : cost.ram_bytes_per_s);
  }
  double sigma() const {
    return cost.sync_s + 2.0 * static_cast<double>(inv.embd_bytes) / cost.link_bytes_per_s;
  }
  void add_layer(size_t l);
  void add_budgets();
};

void Builder::add_layer(size_t l) {
  const LayerInventory& li = inv.layers[l];
  const double bytes = static_cast<double>(li.neuron_bytes);
  const double R = cost.ram_bytes_per_s, V = cost.vram_bytes_per_s, F = cost.flash_neuron_s;
  const double h = li.window_hit_rate, q = working_set_use(li, inv.window);
  const bool dense_gpu = gpu && o.dense_on_gpu;
  LayerColumns lc;
  // C_l = c0 + sum(cv v + cr r) + cs short;  G_l = sum(gv v)
  double c0 = 0;
  std::vector<std::pair<int, double>> cpu_terms, gpu_terms, set_terms, slot_terms, vram_count,
      cpu_count;
  double full_set = 0;
  const double flash_each = bytes / R + (1.0 - h) * F;
  for (const Group& g : groups[l]) {
    const double n = static_cast<double>(g.size);
    const int v = gpu ? prog.column(0, n, GLP_IV, 0) : 0;
    const int r = inv.bundled ? prog.column(0, n, GLP_IV, 0) : 0;
    lc.v.push_back(v);
    lc.r.push_back(r);
    if (v && r) prog.row({{v, 1}, {r, 1}}, n, true);
    if (inv.bundled) {
      c0 += n * g.p * flash_each;
      if (v) cpu_terms.push_back({v, -g.p * flash_each});
      cpu_terms.push_back({r, -g.p * (1.0 - h) * F});
      full_set += n * g.w;
      if (v) set_terms.push_back({v, g.w});
      set_terms.push_back({r, g.w});
      slot_terms.push_back({r, 1});
    } else {
      c0 += n * g.p * bytes / R;
      if (v) cpu_terms.push_back({v, -g.p * bytes / R});
    }
    if (v) {
      gpu_terms.push_back({v, g.p * bytes / V});
      vram_count.push_back({v, 1});
      cpu_count.push_back({v, 1});
    }
  }
  if (inv.bundled) {
    lc.room = prog.column(1, static_cast<double>(li.n_neurons), GLP_IV, 0);
    lc.shortfall = prog.column(0, kInf, GLP_CV, 0);
    cpu_terms.push_back({lc.shortfall, h * q * F});
    // short + room + sum w (v + r) >= full working set
    set_terms.push_back({lc.shortfall, 1});
    set_terms.push_back({lc.room, 1});
    prog.row(set_terms, full_set, false);
    slot_terms.push_back({lc.room, 1});
    prog.row(slot_terms, static_cast<double>(inv.min_cache_slots), false);
    prog.row(slot_terms, static_cast<double>(li.n_neurons), true);  // a cache of n_ff at most
  }
  const double a_cpu = attention_s(l, Device::Host);
  if (!gpu) {
    // One device: the layer's time is linear; C_l goes straight into the objective.
    prog.constant(glp_get_obj_coef(prog.get(), 0) + (a_cpu + c0) * kMicro);
    for (const auto& [j, a] : cpu_terms) glp_set_obj_coef(prog.get(), j, a * kMicro);
    cols.push_back(std::move(lc));
    return;
  }
  lc.t = prog.column(0, kInf, GLP_CV, kMicro);
  lc.a = dense_gpu ? prog.column(0, 1, GLP_BV, 0) : 0;
  lc.u = prog.column(0, 1, GLP_BV, 0);
  lc.c = prog.column(0, 1, GLP_BV, 0);
  lc.s = prog.column(0, 1, GLP_BV, 0);
  const double nff = static_cast<double>(li.n_neurons), sg = sigma();
  // t - (A + C + sigma s) >= 0, t - (A + G + sigma s) >= 0, A = a_cpu + (a_gpu - a_cpu) a
  const double da = attention_s(l, Device::Cuda) - a_cpu;
  for (const auto* part : {&cpu_terms, &gpu_terms}) {
    std::vector<std::pair<int, double>> row{{lc.t, 1}, {lc.s, -sg}};
    if (lc.a) row.push_back({lc.a, -da});
    for (const auto& [j, a] : *part) row.push_back({j, -a});
    prog.row(row, a_cpu + (part == &cpu_terms ? c0 : 0.0), false);
  }
  // u = 1 when any VRAM neuron (and at least min_vram_neurons then); c = 1 when any CPU one.
  std::vector<std::pair<int, double>> up = vram_count, low = vram_count;
  up.push_back({lc.u, -nff});
  prog.row(up, 0, true);
  low.push_back({lc.u, -static_cast<double>(std::min<int64_t>(o.min_vram_neurons, li.n_neurons))});
  prog.row(low, 0, false);
  cpu_count.push_back({lc.c, nff});
  prog.row(cpu_count, nff, false);  // nff - sum v <= nff c
  if (lc.a) prog.row({{lc.s, 1}, {lc.a, -1}, {lc.c, -1}}, -1, false);
  prog.row({{lc.s, 1}, {lc.u, -1}, {lc.a, 1}}, 0, false);  // lc.a == 0: drops out
  cols.push_back(std::move(lc));
}

void Builder::add_budgets() {
  // RAM: what every plan holds, the KV caches of host layers, the FFN part.
  uint64_t fixed = inv.fixed_ram_bytes + inv.output_bytes;
  for (const LayerInventory& l : inv.layers) fixed += l.dense_bytes;
  std::vector<std::pair<int, double>> ram, vram;
  double ram_const = static_cast<double>(fixed);
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const LayerInventory& li = inv.layers[l];
    const LayerColumns& lc = cols[l];
    ram_const += static_cast<double>(li.kv_bytes);
    if (lc.a) {
      ram.push_back({lc.a, -static_cast<double>(li.kv_bytes) * kMiB});
      vram.push_back({lc.a, static_cast<double>(li.dense_bytes + li.kv_bytes) * kMiB});
      prog.row({{any_gpu, 1}, {lc.a, -1}}, 0, false);
    }
    if (inv.bundled) {
      for (int r : lc.r) ram.push_back({r, static_cast<double>(li.neuron_bytes) * kMiB});
      ram.push_back({lc.room, static_cast<double>(li.neuron_bytes) * kMiB});
    } else {
      ram_const += static_cast<double>(li.ffn_ram_bytes);
    }
    for (int v : lc.v)
      if (v) vram.push_back({v, static_cast<double>(li.neuron_bytes) * kMiB});
    if (lc.u) prog.row({{any_gpu, 1}, {lc.u, -1}}, 0, false);
  }
  if (b.ram > 0) {
    // A row with no variables (a model in RAM) is checked by check_minimum already.
    if (!ram.empty())
      prog.row(ram, (static_cast<double>(usable_ram(b.ram)) - ram_const) * kMiB, true);
  }
  if (gpu) {
    if (output_gpu) {
      vram.push_back({output_gpu, static_cast<double>(inv.output_bytes) * kMiB});
      prog.row({{any_gpu, 1}, {output_gpu, -1}}, 0, false);
    }
    vram.push_back({any_gpu, static_cast<double>(inv.workspace_bytes) * kMiB});
    prog.row(vram, static_cast<double>(b.vram) * kMiB, true);
  }
}

// The plan from the solution: per group, the hottest v neurons to VRAM, the next r pinned.
PlacementPlan read_solution(Builder& bld, const std::vector<std::vector<int32_t>>& order) {
  glp_prob* lp = bld.prog.get();
  auto value = [&](int j) { return j ? static_cast<int64_t>(std::llround(glp_mip_col_val(lp, j))) : 0; };
  PlacementPlan p;
  p.solver = "ilp";
  p.bundled = bld.inv.bundled;
  p.layers.resize(bld.inv.layers.size());
  p.output = value(bld.output_gpu) ? Device::Cuda : Device::Host;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    LayerPlan& lp_ = p.layers[l];
    const LayerColumns& lc = bld.cols[l];
    lp_.attention = value(lc.a) ? Device::Cuda : Device::Host;
    for (size_t g = 0; g < bld.groups[l].size(); ++g) {
      const Group& gr = bld.groups[l][g];
      const int64_t v = value(lc.v[g]), r = value(lc.r[g]);
      for (int64_t k = 0; k < v; ++k) lp_.vram.push_back(order[l][static_cast<size_t>(gr.begin + k)]);
      for (int64_t k = v; k < v + r; ++k)
        lp_.pinned.push_back(order[l][static_cast<size_t>(gr.begin + k)]);
    }
    std::sort(lp_.vram.begin(), lp_.vram.end());
    std::sort(lp_.pinned.begin(), lp_.pinned.end());
    if (bld.inv.bundled)
      lp_.cache_slots = std::min<int64_t>(bld.inv.layers[l].n_neurons,
                                          static_cast<int64_t>(lp_.pinned.size()) + value(lc.room));
  }
  return p;
}

}  // namespace

PlacementPlan plan_ilp(const Inventory& inv, const Budgets& b, const CostModel& cost,
                       const SolverOptions& o) {
  check_minimum(inv, b);
  const auto order = hottest_first(inv);
  // The greedy plan's boundaries become group boundaries (see the header comment).
  const PlacementPlan greedy = plan_greedy(inv, b, cost, o);
  Builder bld{inv, b, cost, o, {}, {}, {}, 0, 0, b.vram > inv.workspace_bytes};
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const int64_t m = static_cast<int64_t>(greedy.layers[l].vram.size());
    const int64_t k = static_cast<int64_t>(greedy.layers[l].pinned.size());
    bld.groups.push_back(make_groups(inv.layers[l], order[l], inv, o.groups_per_layer, {m, m + k}));
  }
  if (bld.gpu) {
    bld.any_gpu = bld.prog.column(0, 1, GLP_BV, 0);
    if (o.dense_on_gpu) {
      const double out = static_cast<double>(inv.output_bytes);
      bld.output_gpu = bld.prog.column(0, 1, GLP_BV,
                                       (out / cost.vram_bytes_per_s - out / cost.ram_bytes_per_s) * kMicro);
    }
  }
  for (size_t l = 0; l < inv.layers.size(); ++l) bld.add_layer(l);
  bld.prog.constant(glp_get_obj_coef(bld.prog.get(), 0) +
                    static_cast<double>(inv.output_bytes) / cost.ram_bytes_per_s * kMicro);
  bld.add_budgets();
  bld.prog.load();
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = static_cast<int>(o.time_limit_s * 1000);
  parm.mip_gap = 1e-6;
  const int rc = glp_intopt(bld.prog.get(), &parm);
  const int status = glp_mip_status(bld.prog.get());
  if (status != GLP_OPT && status != GLP_FEAS)
    fail("the placement program has no solution within the budgets (GLPK status {}, code {})",
         status, rc);
  PlacementPlan p = read_solution(bld, order);
  p.budgets = b;
  p.costs = cost;
  p.predicted = evaluate(p, inv, cost);
  check_budgets(p, inv);
  return p;
}

}  // namespace strata
