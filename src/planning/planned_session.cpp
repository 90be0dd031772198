#include "planning/planned_session.h"

#include <fmt/format.h>

#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"
#include "backends/registry.h"
#include "core/error.h"
#include "placement/column_cache.h"
#include "placement/cost_model.h"
#include "placement/solver.h"
#include "planning/device_plan.h"
#include "planning/plan_replay.h"
#include "planning/run_solver.h"
#include "tensor/column_groups.h"

namespace strata {

double flash_neuron_seconds(uint64_t bundle_bytes, const StorageProfile* storage, int depth) {
  // read_seconds is already the time one read takes of the disk's throughput at that depth.
  if (storage != nullptr && !storage->points.empty())
    return storage->read_seconds(bundle_bytes, depth);
  return static_cast<double>(bundle_bytes) / kDefaultFlashBytesPerS;
}

namespace {

SessionOptions base_options(const RunRequest& r) {
  SessionOptions o;
  o.ffn = r.mode;
  o.check_predictor = r.check_predictor;
  o.kv = r.kv;
  o.flash = r.flash;
  o.n_seq = r.n_seq;
  o.sparsity = r.sparsity;
  o.max_batch = r.ubatch;
  return o;
}

// The batch of a plan made on the CPU's path (prompt_batch): what a batch costs per token
// beyond Session::kMaxBatch (the buffers grow linearly with it), from the inventory at two
// sizes, and what the budget leaves beyond its minimum at Session::kMaxBatch. A plan for a GPU
// (strata plan --vram-budget) is for a device's batches.
int64_t cpu_batch(const Model& model, const RunRequest& r, InventoryRequest ir) {
  const bool cpu_alone = !r.allow_vram && r.budgets.vram == 0;
  if (r.ubatch > 0 || !model.weights.bundled || !cpu_alone)
    return prompt_batch(r.ubatch, model.weights.bundled, cpu_alone, {}, 0);
  ir.max_batch = Session::kMaxBatch;
  const Inventory base = take_inventory(model, ir);
  ir.max_batch = 2 * Session::kMaxBatch;
  const uint64_t twice = take_inventory(model, ir).fixed_ram_bytes;
  const uint64_t per_token =
      twice > base.fixed_ram_bytes ? (twice - base.fixed_ram_bytes) / Session::kMaxBatch : 0;
  std::optional<uint64_t> spare;
  if (r.budgets.ram > 0) {
    const uint64_t usable = usable_ram(r.budgets.ram), need = minimum_ram(base);
    spare = usable > need ? usable - need : 0;
  }
  return prompt_batch(0, true, true, spare, per_token);
}

void refuse_vram(const PlacementPlan& p) {
  int64_t neurons = 0, layers = 0;
  for (const LayerPlan& l : p.layers) {
    neurons += static_cast<int64_t>(l.vram.size());
    layers += l.attention == Device::Accelerator;
  }
  if (uses_device(p))
    fail(
        "the plan puts {} attention blocks and {} neurons on a GPU; run it with --vram-budget "
        "(on a GPU), or plan without --vram-budget for the CPU",
        layers, neurons);
}

}  // namespace

const AcceleratorProvider* accelerator_of(const DeviceChoice& choice) {
  if (choice.kind != DeviceKind::Cuda) return nullptr;
  return find_accelerator(choice.emulated ? "cuda-emu" : "cuda");
}

std::unique_ptr<Backend> make_session_backend(PlannedRun& run, ThreadPool& pool, bool repack) {
  const bool cpu_part = run.device.split || !run.session.host_layers.empty();
  if (cpu_part && run.device.kind != DeviceKind::Cpu) {
    // The RAM part of a split FFN computes on this pool, beside the device.
    run.host_backend = std::make_shared<CpuBackend>(pool, CpuBackendOptions{repack, nullptr});
    run.session.host_backend = run.host_backend.get();
  }
  switch (run.device.kind) {
    case DeviceKind::Cuda: {
      AcceleratorOptions o;
      o.budget = run.device.budget;
      return accelerator_of(run.device)->make(o);
    }
    case DeviceKind::Reference: {
      ReferenceDeviceOptions o;
      o.budget = run.device.budget;
      o.threads = pool.size();
      return std::make_unique<ReferenceDevice>(o);
    }
    case DeviceKind::Cpu:
      break;
  }
  CpuBackendOptions o;
  o.repack = repack;
  return std::make_unique<CpuBackend>(pool, o);
}

namespace {

// A column-bundled model's caches get the RAM the rest of the plan leaves under the budget.
void plan_columns(const Model& model, const RunRequest& r, PlannedRun& run) {
  PlacementPlan& p = run.plan;
  p.column_cache_bytes = 0;
  const uint64_t rest = evaluate(p, run.inventory, r.costs).ram_bytes;
  const uint64_t usable = r.budgets.ram > 0 ? usable_ram(r.budgets.ram) : 0;
  if (r.budgets.ram > 0 && rest >= usable)
    fail("--ram-budget {}: the model without its FFN already needs {} of the {} usable",
         size_text(static_cast<double>(r.budgets.ram)), size_text(static_cast<double>(rest)),
         size_text(static_cast<double>(usable)));
  const ColumnCachePlan c = plan_column_caches(usable > rest ? usable - rest : 0, r.budgets.ram > 0,
                                               model.weights.column_layouts());
  p.column_share = c.share;
  p.column_cache_bytes = c.bytes;
  run.session.column_share = c.share;
}

// Per layer the densities of a column-bundled model's gate/up and down inputs under the run's
// mode: TEAL's calibrated shares kept (files calibrated before they were recorded: the level,
// the share of the layers' weights skipped, for every input); CATS drops the level's share of
// the activations, every gate/up column read.
std::vector<ColumnDensity> column_densities(const Model& model, const RunRequest& r) {
  const auto layers = static_cast<size_t>(model.config.n_layer);
  if (r.sparsity.mode == SparsityMode::Off) return std::vector<ColumnDensity>(layers);
  const InputThresholds& t = model.sparsity;
  const size_t at = t.level_index(r.sparsity.level);
  const double level = t.levels[at];
  if (r.sparsity.mode == SparsityMode::Cats)
    return std::vector<ColumnDensity>(layers, {1.0, 1.0 - level});
  std::vector<ColumnDensity> d(layers, {1.0 - level, 1.0 - level});
  if (t.teal_kept.empty()) return d;
  for (size_t l = 0; l < layers; ++l) {
    const InputThresholdRow& kept = t.teal_kept[at * layers + l];
    d[l] = {kept[static_cast<size_t>(MatrixInput::Ffn)],
            kept[static_cast<size_t>(MatrixInput::FfnHidden)]};
  }
  return d;
}

// Whether the flash caches can be replayed for this run: a bundled model computed by the CPU,
// a profile of the run's own mode with its selections, whole reads.
bool replayable(const Model& model, const RunRequest& r, const PlacementPlan& plan) {
  if (!model.weights.bundled || r.profile == nullptr || r.profile->selected_tokens == 0 ||
      r.profile->mode != r.mode || r.mode != FfnMode::Predict || r.flash.split_reads)
    return false;
  for (const LayerPlan& lp : plan.layers)
    if (!lp.vram.empty()) return false;
  return true;
}

// The plan's flash bytes from the caches replayed over the profile's tokens (the cost model's
// window rule misjudged a 7B model's by 60%); where the solver was the run's default, the plan
// without pins (the greedy rule's even caches) runs instead when its replay reads less, so a
// profile never makes a run read more than it would without one. With look-ahead the pinned
// plan must read a tenth less: pins take the hot neurons, which look-ahead guesses well, and
// leave the reads it guesses worse (7B F16 under 7 GiB: a pinned plan replaying 1.8% fewer
// bytes decoded 2.05-2.09 tok/s against 2.63 for even caches, its waits for reads 2.6x).
void choose_by_replay(const Model& model, const RunRequest& r, PlannedRun& run) {
  double bytes = replayed_flash_bytes(model, run.plan, *r.profile, r.flash.window, r.flash.storage);
  const double margin = r.flash.lookahead ? 0.9 : 1.0;
  if (r.plan == nullptr && r.solver == SolverChoice::Auto) {
    RunRequest even = r;
    even.solver = SolverChoice::Greedy;
    even.solver_options.pin_share = 0;
    PlacementPlan plain = solve_run(run.inventory, even, true);
    plain.budgets = r.budgets;
    const double plain_bytes =
        replayed_flash_bytes(model, plain, *r.profile, r.flash.window, r.flash.storage);
    if (bytes > margin * plain_bytes) {
      run.notes.push_back(fmt::format(
          "note: replayed over the profile's {} tokens, the solver's plan reads {:.1f} MiB a "
          "token from flash and even caches without pins {:.1f}{}: running the latter",
          r.profile->selected_tokens, bytes / 1048576.0, plain_bytes / 1048576.0,
          margin < 1 ? " (with look-ahead pins must save a tenth)" : ""));
      run.plan = std::move(plain);
      bytes = plain_bytes;
    }
  }
  run.plan.predicted = evaluate(run.plan, run.inventory, r.costs);
  PlanPrediction& p = run.plan.predicted;
  // The replay's misses cost what the cost model's do, a bundle each.
  const double bundle = static_cast<double>(model.weights.bundle.bundle_bytes);
  p.seconds_per_token += (bytes - p.flash_bytes_per_token) / bundle * r.costs.flash_neuron_s;
  p.flash_bytes_per_token = bytes;
}

}  // namespace

PlannedRun make_plan(const Model& model, const RunRequest& request) {
  PlannedRun run;
  RunRequest r = request;
  // A GPU's KV cache is f16 unless -ctk/-ctv say otherwise; the CPU's f32.
  const bool gpu_asked = r.device.wants_gpu() && r.device.device != "cpu";
  if (gpu_asked && !r.kv_types_given) r.kv = {DType::F16, DType::F16};
  run.session = base_options(r);
  Session::check_options(model, run.session);
  if (model.weights.bundled && r.costs.flash_neuron_s <= 0)
    r.costs.flash_neuron_s =
        flash_neuron_seconds(model.weights.bundle.bundle_bytes, r.flash.storage, kPlannedReadDepth);
  if (gpu_asked) {
    if (plan_on_device(model, r, run)) return run;
    if (!r.kv_types_given) {  // back on the CPU: its default cache
      r.kv = {};
      run.session = base_options(r);
    }
  }
  if (r.profile != nullptr && !model.weights.bundled && r.mode == FfnMode::Dense &&
      r.plan == nullptr && r.budgets.vram == 0)
    run.notes.push_back(
        "the profile is not used: a model in RAM with a dense FFN has nothing to place");
  InventoryRequest ir{r.n_ctx, r.mode, r.kv, r.profile, r.logits_rows, r.n_seq, r.front_end_bytes};
  ir.input_columns = r.input_columns && r.sparsity.mode == SparsityMode::Teal;
  ir.threads = r.threads;
  run.session.max_batch = cpu_batch(model, r, ir);
  ir.max_batch = run.session.max_batch;
  run.inventory = take_inventory(model, ir);
  if (r.plan != nullptr) {
    run.plan = plan_from_json(*r.plan, run.inventory);
    run.plan.budgets = r.budgets;
    run.plan.costs = r.costs;
    if (!r.allow_vram) refuse_vram(run.plan);
    check_budgets(run.plan, run.inventory);
  } else {
    // A plan for a GPU (strata plan --vram-budget) places what a run there would: the budget
    // less what the session holds beside the plan, so the saved plan runs under that budget.
    RunRequest solving = r;
    if (r.allow_vram && r.budgets.vram > 0) {
      const uint64_t aside = bytes_beside_the_plan(model, run.inventory, DeviceKind::Cuda);
      solving.budgets.vram = r.budgets.vram > aside ? r.budgets.vram - aside : 1;
    }
    run.plan = solve_run(run.inventory, solving, model.weights.bundled);
    run.plan.budgets = r.budgets;
    if (r.allow_vram) cpu_layers_whole(run.plan);
    if (!r.allow_vram) refuse_vram(run.plan);
  }
  if (model.weights.column_bundled) plan_columns(model, r, run);
  run.plan.predicted = evaluate(run.plan, run.inventory, r.costs);
  if (replayable(model, r, run.plan)) choose_by_replay(model, r, run);
  if (model.weights.column_bundled) {
    PlanPrediction& p = run.plan.predicted;
    p.flash_bytes_per_token = column_flash_bytes_per_token(
        model.weights.column_layouts(), run.plan.column_share, column_densities(model, r));
    // The reads' time, at the disk's rate for reads of a gate/up bundle (most of the bytes),
    // added to the token's: a layer's column reads and its products do not overlap.
    const uint64_t bundle = model.weights.layers[0].column_bundle.gate_up_bytes;
    p.seconds_per_token += p.flash_bytes_per_token *
                           flash_neuron_seconds(bundle, r.flash.storage, kPlannedReadDepth) /
                           static_cast<double>(bundle);
  }
  return run;
}

namespace {

// The session options that make the plan happen.
void apply_plan(const PlacementPlan& p, const Inventory& inv, SessionOptions& o) {
  if (!inv.bundled) return;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    o.cache_slots.push_back(p.layers[l].cache_slots);
    o.pinned.push_back(p.layers[l].pinned);
  }
}

}  // namespace

int64_t prompt_batch(int64_t asked, bool neuron_bundled, bool cpu_alone,
                     std::optional<uint64_t> spare_ram, uint64_t bytes_per_token) {
  if (asked < 0 || asked > Session::kMaxUbatch)
    fail("-ub {}: a batch holds 1 to {} tokens", asked, Session::kMaxUbatch);
  if (asked > Session::kMaxBatch && !cpu_alone)
    fail("-ub {}: batches of more than {} tokens are for the CPU alone", asked, Session::kMaxBatch);
  if (asked > 0) return asked;
  if (!neuron_bundled || !cpu_alone) return Session::kMaxBatch;
  for (int64_t b = kFlashPromptBatch; b > Session::kMaxBatch; b /= 2)
    if (!spare_ram ||
        static_cast<uint64_t>(b - Session::kMaxBatch) * bytes_per_token <= *spare_ram / 4)
      return b;
  return Session::kMaxBatch;
}

PlannedRun plan_run(Model& model, const RunRequest& r) {
  PlannedRun run = make_plan(model, r);
  apply_plan(run.plan, run.inventory, run.session);
  const ModelWeights& w = model.weights;
  if (r.mode != FfnMode::Dense && !w.has_down_t && !w.bundled) {
    const bool requantized = !is_float_type(w.layers[0].ffn_down.type);
    const uint64_t bytes = model.ensure_down_t();
    run.notes.push_back(fmt::format(
        "note: '{}' has no ffn_down_t; transposed ffn_down at load ({:.1f} MiB more memory{}). "
        "strata train-predictors writes files that carry it.",
        model.file->path(), bytes / 1048576.0,
        requantized ? "; quantized weights were re-quantized along the new rows" : ""));
  }
  // TEAL: decode reads the column copies of the non-zero inputs' columns (a device uploads the
  // copies of its layers).
  if (r.input_columns && r.sparsity.mode == SparsityMode::Teal && model.columns.empty()) {
    const DType type = w.layers[0].attn_q.type;
    const bool device = run.device.kind != DeviceKind::Cpu;
    const uint64_t bytes = model.ensure_input_columns();
    const LayerColumns& first = model.columns[0];
    if (!first.attention() && !first.ffn(ffn_has_gate(model.config.ffn)) &&
        first.ffn_down.data == nullptr)
      run.notes.push_back(fmt::format(
          "note: input-sparse products: no {} matrix fits a column copy (quantized copies need "
          "outputs by 64, Q3_K and Q6_K by 128, and whole blocks of inputs); TEAL multiplies the "
          "row-major matrices",
          dtype_name(type)));
    else
      run.notes.push_back(fmt::format(
          "note: input-sparse products: the attention and FFN matrices transposed at load "
          "({:.1f} MiB more memory{}{})",
          bytes / 1048576.0,
          has_column_groups(type) ? "; quantized matrices as column groups, values unchanged" : "",
          device ? "; the device's layers hold their copies in its memory too" : ""));
  }
  // After ensure_down_t and ensure_input_columns, which read the file's rows.
  // The CUDA kernels read the file's rows; the CPU and the reference device share the CPU's.
  const bool repack = r.repack && run.device.kind != DeviceKind::Cuda;
  model.adopt_layouts(
      [&](const MatrixView& m, WeightUse use) { return CpuBackend::layout_for(m, use, repack); },
      r.mode == FfnMode::Dense);
  return run;
}

}  // namespace strata
