// The placement ILP (GLPK). Each layer's neurons, sorted hottest first, are cut into groups;
// a group's variables are how many of its neurons go to VRAM (v) and, for bundled models, how
// many are pinned in RAM (r); the rest stay in RAM (a model in RAM) or on flash behind the
// window cache. Sorted groups make each layer's activation mass concave in the count placed,
// so placing counts (the hottest of a group first) loses little against placing neurons, and
// the program stays small: 40 layers x ~18 groups x 2 variables at 13B. The greedy rule's
// boundaries are group boundaries, so its plan is a solution whose modelled cost is exact:
// branch and bound starts from it and can only improve on it.
//
// Per layer l (seconds, the cost model's terms; p = mean activation of a group, b = neuron
// bytes, R/V = RAM/VRAM bandwidth, F = one flash read, h = window hit rate, k = 1.5):
//   G_l = sum_g v_lg p b / V                                      (the GPU's FFN share)
//   C_l = sum_g (n_g - v_lg) p b / R + F m_l                      (the CPU's; m_l: misses)
//   d_l = sum_g (n_g - v_lg - r_lg) p                             (the window cache's demand)
//   m_l >= (1 - h) d_l,  m_l >= d_l - h (room_l - d_l) / (k - 1)  (bundled: window_misses)
//   t_l >= A_l + G_l + sigma s_l,  t_l >= A_l + C_l + sigma s_l   (both devices at once)
//   A_l = attention on the host or, a_l = 1, on the GPU; s_l = 1 when the layer uses both
//   (s >= a + c - 1, s >= u - a; u: any VRAM neuron, c: any neuron on the CPU).
// Minimise sum_l t_l + the output head's time, subject to RAM and VRAM budgets (hard),
// cache slots (room + pinned) between the minimum and n_ff, and PowerInfer's per-layer minimum
// if asked. PowerInfer's shipped ILP (maximise activation mass in VRAM under its capacity) is
// the case V -> infinity, sigma = 0, dense blocks on the host: sum_l t_l = const - mass_gpu b/R.
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

#include "core/error.h"
#include "core/timer.h"
#include "placement/cost_model.h"
#include "placement/fit_budgets.h"
#include "placement/glpk_program.h"
#include "placement/solver.h"

namespace strata {

namespace {

struct Group {
  int64_t begin = 0, size = 0;  // ranks in the layer's hottest-first order
  double p = 0;                 // mean activation over the group
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
    Group g{cuts[i], cuts[i + 1] - cuts[i], 0};
    if (g.size <= 0 || g.begin < 0 || g.begin + g.size > n) continue;
    for (int64_t k = g.begin; k < g.begin + g.size; ++k) {
      g.p += p_of(k);
    }
    g.p /= static_cast<double>(g.size);
    out.push_back(g);
  }
  return out;
}

constexpr double kMicro = 1e6;            // objective in microseconds
constexpr double kMiB = 1.0 / 1048576.0;  // budget rows in MiB
const double kInf = std::numeric_limits<double>::infinity();

// One layer's columns of the integer program (GLPK's variable indices; 0: absent).
struct LayerVariables {
  std::vector<int> v, r;  // per group (0: absent)
  int room = 0, misses = 0, t = 0, a = 0, u = 0, c = 0, s = 0;
  std::vector<int> t_rows;  // the rows that bound t from below
};

// One layer's terms while its rows are built: C_l = c0 + sum(cpu), G_l = sum(gpu); the window
// cache's demand (uses per token of the flash neurons) = demand0 - sum(demand) and its slots.
struct LayerTerms {
  double c0 = 0, demand0 = 0;
  std::vector<std::pair<int, double>> cpu, gpu, demand, slots, vram_count;
};

struct Builder {
  const Inventory& inv;
  const Budgets& b;
  const CostModel& cost;
  const SolverOptions& o;
  std::vector<std::vector<Group>> groups;
  Program prog;
  std::vector<LayerVariables> cols;
  int output_gpu = 0, any_gpu = 0;
  bool gpu = false;

  double attention_s(size_t l, Device d) const {
    return attention_bytes(inv, inv.layers[l]) / bandwidth(cost, d);
  }
  void add_layer(size_t l);
  void add_groups(size_t l, LayerVariables& lc, LayerTerms& t);
  void add_window_cache(size_t l, LayerVariables& lc, LayerTerms& t);
  void add_devices(size_t l, LayerVariables& lc, const LayerTerms& t);
  void add_budgets();
  std::vector<double> columns_of(const PlacementPlan& p,
                                 const std::vector<std::vector<int32_t>>& order);
};

void Builder::add_groups(size_t l, LayerVariables& lc, LayerTerms& t) {
  const LayerInventory& li = inv.layers[l];
  const double bytes = static_cast<double>(li.neuron_bytes);
  const double R = cost.ram_bytes_per_s, V = cost.vram_bytes_per_s;
  for (const Group& g : groups[l]) {
    const double n = static_cast<double>(g.size);
    const int v = gpu ? prog.column(0, n, GLP_IV, 0) : 0;
    const int r = inv.bundled ? prog.column(0, n, GLP_IV, 0) : 0;
    lc.v.push_back(v);
    lc.r.push_back(r);
    if (v && r) prog.row({{v, 1}, {r, 1}}, n, true);
    // Every neuron not in VRAM is computed from RAM (the matrices or the cache).
    t.c0 += n * g.p * bytes / R;
    if (v) t.cpu.push_back({v, -g.p * bytes / R});
    if (inv.bundled) {
      t.demand0 += n * g.p;  // pinned and VRAM neurons leave the window cache's demand
      if (v) t.demand.push_back({v, g.p});
      t.demand.push_back({r, g.p});
      t.slots.push_back({r, 1});
    }
    if (v) {
      t.gpu.push_back({v, g.p * static_cast<double>(li.device_neuron_bytes()) / V});
      t.vram_count.push_back({v, 1});
    }
  }
}

void Builder::add_window_cache(size_t l, LayerVariables& lc, LayerTerms& t) {
  // misses >= (1 - h) d and misses >= d - a (room - d), a = h / (k - 1) (cost_model.h), with
  // d = demand0 - sum(demand terms): each row as misses + ... >= constant.
  const LayerInventory& li = inv.layers[l];
  const double h = li.window_hit_rate, a = h / (kRoomForFullReuse - 1.0);
  lc.room = prog.column(1, static_cast<double>(li.n_neurons), GLP_IV, 0);
  lc.misses = prog.column(0, kInf, GLP_CV, 0);
  t.cpu.push_back({lc.misses, cost.flash_neuron_s});
  std::vector<std::pair<int, double>> reuse{{lc.misses, 1}}, room{{lc.misses, 1}, {lc.room, a}};
  for (const auto& [j, p] : t.demand) {
    reuse.push_back({j, (1.0 - h) * p});
    room.push_back({j, (1.0 + a) * p});
  }
  prog.row(reuse, (1.0 - h) * t.demand0, false);
  prog.row(room, (1.0 + a) * t.demand0, false);
  t.slots.push_back({lc.room, 1});
  prog.row(t.slots, static_cast<double>(inv.min_cache_slots), false);
  prog.row(t.slots, static_cast<double>(li.n_neurons), true);  // a cache of n_ff at most
}

void Builder::add_devices(size_t l, LayerVariables& lc, const LayerTerms& t) {
  const LayerInventory& li = inv.layers[l];
  const double a_cpu = attention_s(l, Device::Host);
  lc.t = prog.column(0, kInf, GLP_CV, kMicro);
  lc.a = o.dense_on_gpu ? prog.column(0, 1, GLP_BV, 0) : 0;
  lc.u = prog.column(0, 1, GLP_BV, 0);
  lc.c = prog.column(0, 1, GLP_BV, 0);
  lc.s = prog.column(0, 1, GLP_BV, 0);
  const double sg = sync_seconds(inv, cost);
  // t - (A + C + sigma s) >= 0, t - (A + G + sigma s) >= 0, A = a_cpu + (a_gpu - a_cpu) a;
  // in microseconds, like the objective (GLPK's tolerances are absolute).
  const double da = attention_s(l, Device::Accelerator) - a_cpu;
  for (const auto* part : {&t.cpu, &t.gpu}) {
    std::vector<std::pair<int, double>> row{{lc.t, kMicro}, {lc.s, -sg * kMicro}};
    if (lc.a) row.push_back({lc.a, -da * kMicro});
    for (const auto& [j, a] : *part) row.push_back({j, -a * kMicro});
    lc.t_rows.push_back(prog.row(row, (a_cpu + (part == &t.cpu ? t.c0 : 0.0)) * kMicro, false));
  }
  // u = 1 when any VRAM neuron (and at least min_vram_neurons then); c = 1 when any CPU one.
  // Group by group (v <= n_g u, n_g - v <= n_g c) rather than summed: the relaxation then
  // forces u (c) to 1 as soon as one group is wholly in VRAM (on the CPU), which keeps the
  // LP bound tight and the branching short.
  for (size_t g = 0; g < groups[l].size(); ++g) {
    const double n = static_cast<double>(groups[l][g].size);
    if (!lc.v[g]) continue;
    prog.row({{lc.v[g], 1}, {lc.u, -n}}, 0, true);
    prog.row({{lc.v[g], 1}, {lc.c, n}}, n, false);
  }
  std::vector<std::pair<int, double>> low = t.vram_count;
  low.push_back({lc.u, -static_cast<double>(std::min<int64_t>(o.min_vram_neurons, li.n_neurons))});
  prog.row(low, 0, false);
  if (o.neurons_with_attention) {  // u <= a (with no attention variable: no VRAM neurons)
    if (lc.a)
      prog.row({{lc.u, 1}, {lc.a, -1}}, 0, true);
    else
      prog.row({{lc.u, 1}}, 0, true);
  }
  if (lc.a) prog.row({{lc.s, 1}, {lc.a, -1}, {lc.c, -1}}, -1, false);
  prog.row({{lc.s, 1}, {lc.u, -1}, {lc.a, 1}}, 0, false);  // lc.a == 0: drops out
}

void Builder::add_layer(size_t l) {
  LayerVariables lc;
  LayerTerms t;
  add_groups(l, lc, t);
  if (inv.bundled) add_window_cache(l, lc, t);
  if (gpu) {
    add_devices(l, lc, t);
  } else {
    // One device: the layer's time is linear; C_l goes straight into the objective.
    const double a_cpu = attention_s(l, Device::Host);
    prog.constant(glp_get_obj_coef(prog.get(), 0) + (a_cpu + t.c0) * kMicro);
    for (const auto& [j, a] : t.cpu) glp_set_obj_coef(prog.get(), j, a * kMicro);
  }
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
    const LayerVariables& lc = cols[l];
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
      if (v) vram.push_back({v, static_cast<double>(li.device_neuron_bytes()) * kMiB});
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

// The program's column values for a plan (1-based, as GLPK wants): per group the counts of its
// neurons in VRAM and pinned, the caches' room and shortfall, the devices, each layer's time
// from its rows. A feasible plan gives a feasible solution: branch and bound starts from it.
std::vector<double> Builder::columns_of(const PlacementPlan& p,
                                        const std::vector<std::vector<int32_t>>& order) {
  glp_prob* lp = prog.get();
  std::vector<double> x(static_cast<size_t>(glp_get_num_cols(lp)) + 1, 0.0);
  auto set = [&](int j, double v) {
    if (j) x[static_cast<size_t>(j)] = v;
  };
  bool any = p.output == Device::Accelerator;
  set(output_gpu, any);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp_ = p.layers[l];
    const LayerVariables& lc = cols[l];
    const std::vector<Group>& gs = groups[l];
    std::vector<size_t> group_of(order[l].size());
    for (size_t g = 0; g < gs.size(); ++g)
      for (int64_t k = gs[g].begin; k < gs[g].begin + gs[g].size; ++k)
        group_of[static_cast<size_t>(order[l][static_cast<size_t>(k)])] = g;
    std::vector<double> v(gs.size(), 0.0), r(gs.size(), 0.0);
    for (int32_t id : lp_.vram) v[group_of[static_cast<size_t>(id)]] += 1;
    for (int32_t id : lp_.pinned) r[group_of[static_cast<size_t>(id)]] += 1;
    double demand = 0;
    for (size_t g = 0; g < gs.size(); ++g) {
      set(lc.v[g], v[g]);
      set(lc.r[g], r[g]);
      demand += (static_cast<double>(gs[g].size) - v[g] - r[g]) * gs[g].p;
    }
    const double room =
        static_cast<double>(lp_.cache_slots) - static_cast<double>(lp_.pinned.size());
    set(lc.room, room);
    set(lc.misses, window_misses(demand, room, inv.layers[l].window_hit_rate) * (1 + 1e-12));
    const bool a = lp_.attention == Device::Accelerator, u = !lp_.vram.empty();
    const bool c = static_cast<int64_t>(lp_.vram.size()) < inv.layers[l].n_neurons;
    set(lc.a, a);
    set(lc.u, u);
    set(lc.c, c);
    set(lc.s, (a && c) || (u && !a));
    any = any || a || u;
  }
  set(any_gpu, any);
  // Each layer's time: the largest of what its rows require.
  std::vector<int> ind(x.size());
  std::vector<double> val(x.size());
  for (const LayerVariables& lc : cols) {
    double t = 0;
    for (int i : lc.t_rows) {
      const int len = glp_get_mat_row(lp, i, ind.data(), val.data());
      double rest = 0, coef = 1;
      for (int k = 1; k <= len; ++k)
        if (ind[static_cast<size_t>(k)] == lc.t)
          coef = val[static_cast<size_t>(k)];
        else
          rest += val[static_cast<size_t>(k)] * x[static_cast<size_t>(ind[static_cast<size_t>(k)])];
      t = std::max(t, (glp_get_row_lb(lp, i) - rest) / coef);
    }
    set(lc.t, t * (1 + 1e-12) + 1e-12);
  }
  return x;
}

// The plan from a solution (the MIP's, or the LP relaxation's rounded: counts down, binaries to
// the nearest, rooms up): per group, the hottest v neurons to VRAM, the next r pinned.
PlacementPlan read_solution(Builder& bld, const std::vector<std::vector<int32_t>>& order,
                            bool mip) {
  glp_prob* lp = bld.prog.get();
  auto raw = [&](int j) {
    return j ? (mip ? glp_mip_col_val(lp, j) : glp_get_col_prim(lp, j)) : 0.0;
  };
  auto count = [&](int j) { return static_cast<int64_t>(std::floor(raw(j) + 1e-6)); };
  auto binary = [&](int j) { return raw(j) > 0.5; };
  PlacementPlan p;
  p.solver = "ilp";
  p.bundled = bld.inv.bundled;
  p.layers.resize(bld.inv.layers.size());
  p.output = binary(bld.output_gpu) ? Device::Accelerator : Device::Host;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    LayerPlan& lp_ = p.layers[l];
    const LayerVariables& lc = bld.cols[l];
    const int64_t n = bld.inv.layers[l].n_neurons;
    lp_.attention = binary(lc.a) ? Device::Accelerator : Device::Host;
    for (size_t g = 0; g < bld.groups[l].size(); ++g) {
      const Group& gr = bld.groups[l][g];
      const int64_t v = std::min(count(lc.v[g]), gr.size),
                    r = std::min(count(lc.r[g]), gr.size - v);
      for (int64_t k = 0; k < v; ++k)
        lp_.vram.push_back(order[l][static_cast<size_t>(gr.begin + k)]);
      for (int64_t k = v; k < v + r; ++k)
        lp_.pinned.push_back(order[l][static_cast<size_t>(gr.begin + k)]);
    }
    if (static_cast<int64_t>(lp_.vram.size()) < bld.o.min_vram_neurons) lp_.vram.clear();
    std::sort(lp_.vram.begin(), lp_.vram.end());
    std::sort(lp_.pinned.begin(), lp_.pinned.end());
    if (!bld.inv.bundled) continue;
    const int64_t room = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(raw(lc.room) - 1e-6)));
    const int64_t pinned = static_cast<int64_t>(lp_.pinned.size());
    lp_.cache_slots = std::min(n, std::max(pinned + room, bld.inv.min_cache_slots));
  }
  return p;
}

// Fixes the device decisions (binaries) of the program to those of `p`.
void fix_devices(Builder& bld, const PlacementPlan& p) {
  glp_prob* lp = bld.prog.get();
  auto fix = [&](int j, bool on) {
    if (j) glp_set_col_bnds(lp, j, GLP_FX, on ? 1.0 : 0.0, on ? 1.0 : 0.0);
  };
  bool any = p.output == Device::Accelerator;
  fix(bld.output_gpu, any);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp_ = p.layers[l];
    const LayerVariables& lc = bld.cols[l];
    const bool a = lp_.attention == Device::Accelerator, u = !lp_.vram.empty();
    const bool c = static_cast<int64_t>(lp_.vram.size()) < bld.inv.layers[l].n_neurons;
    fix(lc.a, a);
    fix(lc.u, u);
    fix(lc.c, c);
    fix(lc.s, (a && c) || (u && !a));
    any = any || a || u;
  }
  fix(bld.any_gpu, any);
}

}  // namespace

namespace {

// The integer program: each layer's groups (the greedy plan's boundaries among theirs), the
// devices' columns, every layer's rows, the budgets; loaded into GLPK (and written to
// STRATA_ILP_DUMP when set).
void build_program(Builder& bld, const PlacementPlan& greedy,
                   const std::vector<std::vector<int32_t>>& order) {
  const Inventory& inv = bld.inv;
  const CostModel& cost = bld.cost;
  const SolverOptions& o = bld.o;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    const int64_t m = static_cast<int64_t>(greedy.layers[l].vram.size());
    const int64_t k = static_cast<int64_t>(greedy.layers[l].pinned.size());
    bld.groups.push_back(make_groups(inv.layers[l], order[l], inv, o.groups_per_layer, {m, m + k}));
  }
  if (bld.gpu) {
    bld.any_gpu = bld.prog.column(0, 1, GLP_BV, 0);
    if (o.dense_on_gpu) {
      const double out = static_cast<double>(inv.output_bytes);
      bld.output_gpu = bld.prog.column(
          0, 1, GLP_BV, (out / cost.vram_bytes_per_s - out / cost.ram_bytes_per_s) * kMicro);
    }
  }
  for (size_t l = 0; l < inv.layers.size(); ++l) bld.add_layer(l);
  bld.prog.constant(glp_get_obj_coef(bld.prog.get(), 0) +
                    static_cast<double>(inv.output_bytes) / cost.ram_bytes_per_s * kMicro);
  bld.add_budgets();
  bld.prog.load();
  if (std::getenv("STRATA_ILP_DUMP"))
    glp_write_lp(bld.prog.get(), nullptr, std::getenv("STRATA_ILP_DUMP"));
}

// The LP relaxation (its rounding is a plan whatever happens next; branch and bound starts from
// its basis): its objective, the program's lower bound in seconds per token.
double solve_relaxation(Builder& bld, double time_limit_s) {
  glp_smcp lp_parm;
  glp_init_smcp(&lp_parm);
  lp_parm.presolve = GLP_ON;
  lp_parm.msg_lev = GLP_MSG_OFF;
  lp_parm.tm_lim = static_cast<int>(time_limit_s * 1000);
  if (glp_simplex(bld.prog.get(), &lp_parm) != 0 || glp_get_status(bld.prog.get()) != GLP_OPT)
    fail("the placement program has no solution within the budgets (GLPK status {})",
         glp_get_status(bld.prog.get()));
  return glp_get_obj_val(bld.prog.get()) / kMicro;
}

}  // namespace

PlacementPlan plan_ilp(const Inventory& inv, const Budgets& b, const CostModel& cost,
                       const SolverOptions& o) {
  check_minimum(inv, b);
  const auto order = hottest_first(inv);
  // The greedy plan's boundaries become group boundaries (see the header comment).
  const PlacementPlan greedy = plan_greedy(inv, b, cost, o);
  Builder bld{inv, b, cost, o, {}, {}, {}, 0, 0, b.vram > inv.workspace_bytes};
  build_program(bld, greedy, order);
  const Timer timer;
  const double bound = solve_relaxation(bld, o.time_limit_s);
  auto finish = [&](PlacementPlan p, const char* status) {
    p.lower_bound_s = bound;
    p.budgets = b;
    p.costs = cost;
    p.status = status;
    fit_within_budgets(p, inv);
    p.predicted = evaluate(p, inv, cost);
    return p;
  };
  PlacementPlan best = finish(read_solution(bld, order, false), "LP relaxation, rounded");
  // The greedy plan is a solution too (its boundaries are group boundaries).
  auto meets_minimum = [&](const PlacementPlan& p) {
    for (const LayerPlan& l : p.layers)
      if (!l.vram.empty() && static_cast<int64_t>(l.vram.size()) < o.min_vram_neurons) return false;
    return true;
  };
  if (greedy.predicted.seconds_per_token < best.predicted.seconds_per_token &&
      meets_minimum(greedy)) {
    best = greedy;
    best.solver = "ilp";
    best.status = "the greedy rule (no better solution found)";
    best.lower_bound_s = bound;
  }
  // Branch and bound starts from the best plan so far (GLPK takes it as its first incumbent),
  // so it can only improve on it.
  struct Start {
    std::vector<double> x;
    bool sent = false;
  } start;
  auto offer_start = [](glp_tree* tree, void* info) {
    auto* st = static_cast<Start*>(info);
    if (glp_ios_reason(tree) != GLP_IHEUR || st->sent) return;
    st->sent = true;
    glp_ios_heur_sol(tree, st->x.data());
  };
  auto branch_and_bound = [&](double seconds, const char* found) {
    start = Start{bld.columns_of(best, order), false};
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.cb_func = offer_start;
    parm.cb_info = &start;
    parm.msg_lev = std::getenv("STRATA_ILP_VERBOSE") ? GLP_MSG_ON : GLP_MSG_OFF;
    parm.tm_lim = std::max(1, static_cast<int>(seconds * 1000));
    parm.mip_gap = o.mip_gap;
    parm.fp_heur = GLP_ON;
    const int rc = glp_intopt(bld.prog.get(), &parm);
    const int status = glp_mip_status(bld.prog.get());
    if (status != GLP_OPT && status != GLP_FEAS) return;
    const char* how = status == GLP_OPT || rc == GLP_EMIPGAP ? "optimal" : found;
    PlacementPlan mip = finish(read_solution(bld, order, true), how);
    if (mip.predicted.seconds_per_token <= best.predicted.seconds_per_token) best = std::move(mip);
  };
  // Every decision at once, for part of the time left: small programs finish here.
  const bool devices = bld.gpu;
  branch_and_bound((o.time_limit_s - timer.seconds()) * (devices ? 0.3 : 1.0),
                   "time limit, best found");
  if (devices && best.status != std::string("optimal")) {
    // Relax and fix: the devices (dense blocks, which layers use the GPU and the CPU) as the
    // best plan so far has them, then the counts alone, which branch and bound settles fast.
    fix_devices(bld, best);
    glp_smcp again;
    glp_init_smcp(&again);
    again.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(bld.prog.get(), &again) == 0 && glp_get_status(bld.prog.get()) == GLP_OPT)
      branch_and_bound(o.time_limit_s - timer.seconds(), "devices fixed, time limit");
    if (best.status == std::string("optimal")) best.status = "devices fixed, then optimal";
  }
  check_budgets(best, inv);
  return best;
}

}  // namespace strata
