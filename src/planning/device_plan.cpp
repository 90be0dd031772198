#include "planning/device_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "backends/registry.h"
#include "core/error.h"
#include "model/layer_ops.h"
#include "placement/cost_model.h"
#include "placement/solver.h"
#include "planning/run_solver.h"
#include "runtime/resident_weights.h"

namespace strata {

uint64_t device_session_bytes(const Model& model, const Inventory& inv, DeviceKind kind,
                              bool with_ffn) {
  const ModelConfig& c = model.config;
  uint64_t kv = 0;
  for (const LayerInventory& l : inv.layers) kv += l.kv_bytes;
  const FfnMode mode = inv.sparse ? FfnMode::Predict : FfnMode::Dense;
  const uint64_t logits = static_cast<uint64_t>(Session::kMaxBatch * c.n_vocab) * sizeof(float);
  const uint64_t counters = static_cast<uint64_t>(c.n_layer) * sizeof(uint64_t);
  const uint64_t own = kind == DeviceKind::Cuda ? cuda_accelerator().overhead_bytes() : 0;
  // A split adds the slots of its device part and the second part's sum (pass_out; a bundled
  // model's workspace has it already). A bundled model's FFN is always a split's, and whole it
  // is every neuron's rows.
  const bool bundled = model.weights.bundled;
  uint64_t split = 0, neurons = 0;
  if (!with_ffn || bundled)
    split = static_cast<uint64_t>(c.ffn_neurons()) * sizeof(int32_t) +
            (bundled ? 0 : static_cast<uint64_t>(Session::kMaxBatch * c.n_embd) * 4);
  if (with_ffn && bundled)
    for (const LayerInventory& l : inv.layers)
      neurons += static_cast<uint64_t>(l.n_neurons) * l.device_neuron_bytes();
  return ResidentWeights::device_bytes(model, mode, with_ffn, inv.input_columns) + neurons + kv +
         inv.workspace_bytes + logits + counters + static_cast<uint64_t>(c.n_ff) * sizeof(int32_t) +
         own + split;
}

uint64_t bytes_beside_the_plan(const Model& model, const Inventory& inv, DeviceKind kind) {
  const uint64_t held = device_session_bytes(model, inv, kind, /*with_ffn=*/false);
  uint64_t placed = inv.workspace_bytes + inv.output_bytes;
  for (const LayerInventory& l : inv.layers) placed += l.dense_bytes + l.kv_bytes;
  return held > placed ? held - placed : 0;
}

bool uses_device(const PlacementPlan& p) {
  if (p.output == Device::Accelerator) return true;
  for (const LayerPlan& l : p.layers)
    if (l.attention == Device::Accelerator || !l.vram.empty()) return true;
  return false;
}

void cpu_layers_whole(PlacementPlan& p) {
  for (LayerPlan& l : p.layers)
    if (l.attention != Device::Accelerator) l.vram.clear();
}

std::vector<uint8_t> declined_layers(const ModelWeights& w, const std::function<bool(DType)>& reads,
                                     std::vector<std::string>* types) {
  std::vector<uint8_t> declined(w.layers.size(), 0);
  auto check = [&](size_t l, const MatrixView& m) {
    if (m.data == nullptr || reads(m.type)) return;
    declined[l] = 1;
    const std::string name = dtype_name(m.type);
    if (types != nullptr && std::find(types->begin(), types->end(), name) == types->end())
      types->push_back(name);
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& layer = w.layers[l];
    for (const LayerMatrixSlot& slot : kLayerMatrixSlots) check(l, layer.*slot.member);
    for_each_expert_matrix(layer, [&](const MatrixView& m, const std::string&) { check(l, m); });
  }
  return declined;
}

std::vector<uint8_t> layers_needing_what_it_lacks(const ModelConfig& c,
                                                  const std::function<bool(LayerOp)>& supports,
                                                  std::vector<std::string>* ops) {
  std::vector<uint8_t> lacking(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const LayerOp op : layer_ops(c, l)) {
      if (supports(op)) continue;
      lacking[static_cast<size_t>(l)] = 1;
      const std::string name = layer_op_name(op);
      if (ops != nullptr && std::find(ops->begin(), ops->end(), name) == ops->end())
        ops->push_back(name);
    }
  return lacking;
}

bool keep_declined_on_host(PlacementPlan& p, const std::vector<uint8_t>& declined,
                           bool output_declined) {
  bool changed = false;
  for (size_t l = 0; l < p.layers.size() && l < declined.size(); ++l) {
    LayerPlan& lp = p.layers[l];
    if (declined[l] == 0 || (lp.attention == Device::Host && lp.vram.empty())) continue;
    lp.attention = Device::Host;
    lp.vram.clear();
    changed = true;
  }
  if (output_declined && p.output != Device::Host) {
    p.output = Device::Host;
    changed = true;
  }
  return changed;
}

namespace {

bool experts_split(const Model& model, const RunRequest& r) {
  return model.config.moe() && r.mode == FfnMode::Dense && !model.weights.bundled;
}

constexpr double kReadShareOfPeak = 0.85;  // of a GPU's memory peak, the planned read speed

// The session options of a plan split between the device and the CPU: each layer's VRAM
// neurons, the layers and the output head on the CPU.
// The session's layer->part map from the plan: 1 for each layer on the CPU.
void host_layers_of(const PlacementPlan& p, SessionOptions& o) {
  o.host_layers.clear();
  for (const LayerPlan& l : p.layers) o.host_layers.push_back(l.attention == Device::Host ? 1 : 0);
  o.output_on_host = p.output == Device::Host;
}

void apply_device_plan(const PlacementPlan& p, SessionOptions& o) {
  for (const LayerPlan& l : p.layers) o.vram_neurons.push_back(l.vram);
  host_layers_of(p, o);
  const bool cpu_layers =
      std::find(o.host_layers.begin(), o.host_layers.end(), 1) != o.host_layers.end();
  if (!cpu_layers && !o.output_on_host) o.host_layers.clear();
}

// What the device decision needs to know of this machine and model.
DeviceFacts device_facts(const Model& model, const Inventory& inv, const RunRequest& r) {
  const DeviceRequest& d = r.device;
  DeviceFacts f;
  f.n_layer = model.config.n_layer;
  f.bundled = model.weights.bundled;
  const AcceleratorProvider& gpu = *find_accelerator(d.device == "cuda-emu" ? "cuda-emu" : "cuda");
  f.gpu_present = d.device != "reference" && gpu.device_count() > 0;
  if (f.gpu_present) {
    const AcceleratorInfo info = gpu.info(0);
    const uint64_t reserve = uint64_t{512} << 20;  // the CUDA context and cuBLAS's handle
    f.gpu_free_bytes = info.free_bytes > reserve ? info.free_bytes - reserve : 0;
    f.gpu_peak_bytes_per_s = info.peak_bytes_per_s;
  } else if (d.device != "reference") {
    f.no_gpu_reason = gpu.unavailable_reason();
  }
  const DeviceKind kind = d.device == "reference" ? DeviceKind::Reference : DeviceKind::Cuda;
  f.needed_bytes = device_session_bytes(model, inv, kind);
  // A dense mixture splits by whole experts (KTransformers'); otherwise predict mode by neuron.
  f.can_split = (r.mode == FfnMode::Predict && !r.check_predictor) || experts_split(model, r);
  f.splits_experts = experts_split(model, r);
  f.dense_bytes = device_session_bytes(model, inv, kind, /*with_ffn=*/false);
  // The least: the buffers and one layer's dense blocks and KV cache (the rest on the CPU).
  const LayerInventory& l0 = inv.layers.front();
  f.min_split_bytes =
      bytes_beside_the_plan(model, inv, kind) + inv.workspace_bytes + l0.dense_bytes + l0.kv_bytes;
  return f;
}

// A split FFN's plan: the solver places the dense blocks layer by layer and then the hottest
// neurons in what the device's budget leaves (the inventory holds what a plan places; the
// backend's own buffers and the split's are set aside first). Layers whose attention stays on
// the CPU compute wholly there: their neurons leave VRAM (the budget they held stays unused).
// The ILP may place nothing on the device, its cost model predicting the CPU alone faster (a
// small model): the caller runs on the CPU then; the greedy solver places attention first, so
// nothing there means nothing fit.
PlacementPlan plan_split(const Model& model, const Inventory& inv, const RunRequest& r,
                         const DeviceChoice& choice) {
  const uint64_t aside = bytes_beside_the_plan(model, inv, choice.kind);
  RunRequest req = r;
  req.budgets.vram = choice.budget > aside ? choice.budget - aside : 1;
  PlacementPlan p = solve_run(inv, req, model.weights.bundled);
  cpu_layers_whole(p);
  int64_t gpu_blocks = 0;
  for (const LayerPlan& l : p.layers) gpu_blocks += l.attention == Device::Accelerator;
  if (gpu_blocks == 0 && p.solver != "ilp")
    fail(
        "not one layer's attention fits the {} budget with its KV cache; raise --vram-budget or "
        "lower -c",
        size_text(static_cast<double>(choice.budget)));
  return p;
}

// A saved plan (strata plan --vram-budget -o) run on a device: checked against the model, the
// RAM budget, and the device's budget with what the session holds beside the plan.
PlacementPlan saved_device_plan(const Model& model, const Inventory& inv, const RunRequest& r,
                                const DeviceChoice& choice) {
  PlacementPlan p = plan_from_json(*r.plan, inv);
  cpu_layers_whole(p);
  p.costs = r.costs;
  const uint64_t held = evaluate(p, inv, r.costs).vram_bytes;
  const uint64_t aside = bytes_beside_the_plan(model, inv, choice.kind);
  if (choice.budget > 0 && held + aside > choice.budget)
    fail(
        "the plan holds {} on the GPU and the session {} beside it, more than the {} budget; "
        "plan again for this budget (strata plan --vram-budget)",
        size_text(static_cast<double>(held)), size_text(static_cast<double>(aside)),
        size_text(static_cast<double>(choice.budget)));
  p.budgets = {r.budgets.ram, held};
  check_budgets(p, inv);  // RAM, and the plan's own consistency
  p.budgets.vram = choice.budget;
  return p;
}

// -ngl N of the model's layers (llama.cpp's count): the last N on the device whole, the first
// ones and the output head on the CPU. Fails naming the sizes when they do not fit.
PlacementPlan plan_gpu_layers(const Model& model, const Inventory& inv, const RunRequest& r,
                              const DeviceChoice& choice) {
  PlacementPlan p = plan_whole_gpu(inv, {r.budgets.ram, choice.budget}, r.costs);
  p.solver = fmt::format("-ngl {}", choice.gpu_layers);
  p.output = Device::Host;
  const int64_t first_gpu = model.config.n_layer - choice.gpu_layers;
  for (int64_t l = 0; l < first_gpu; ++l) {
    p.layers[static_cast<size_t>(l)].attention = Device::Host;
    p.layers[static_cast<size_t>(l)].vram.clear();
  }
  // What the plan places, plus what the session holds beside it.
  const uint64_t need =
      evaluate(p, inv, r.costs).vram_bytes + bytes_beside_the_plan(model, inv, choice.kind);
  if (choice.budget > 0 && need > choice.budget)
    fail("-ngl {}: those layers need {} on the GPU, more than the {} budget; lower -ngl or -c",
         choice.gpu_layers, size_text(static_cast<double>(need)),
         size_text(static_cast<double>(choice.budget)));
  return p;
}

}  // namespace

namespace {

// The layers whose weights the run's device declines, kept on the CPU, with a note naming them.
// The reference device reads every type the CPU does.
bool keep_what_the_device_declines(const Model& model, PlannedRun& run) {
  const AcceleratorProvider* device = accelerator_of(run.device);
  if (device == nullptr) return false;
  std::vector<std::string> types, ops;
  const auto reads = [device](DType t) { return device->reads_weights(t); };
  std::vector<uint8_t> declined = declined_layers(model.weights, reads, &types);
  const std::vector<uint8_t> lacking = layers_needing_what_it_lacks(
      model.config, [device](LayerOp op) { return device->supports(op); }, &ops);
  for (size_t l = 0; l < declined.size() && l < lacking.size(); ++l) declined[l] |= lacking[l];
  const bool output = !reads(model.weights.output.type);
  if (output) types.push_back(dtype_name(model.weights.output.type));
  if (!keep_declined_on_host(run.plan, declined, output)) return false;
  const auto n = std::count(declined.begin(), declined.end(), uint8_t{1});
  std::vector<std::string> what;
  if (!types.empty()) what.push_back(fmt::format("{} weights", fmt::join(types, ", ")));
  what.insert(what.end(), ops.begin(), ops.end());
  run.notes.push_back(fmt::format("note: the {} backend has no kernels for {}: {} layer{}{} "
                                  "computed on the CPU",
                                  device->name(), fmt::join(what, ", "), n, n == 1 ? "" : "s",
                                  output ? " and the output head" : ""));
  return true;
}

}  // namespace

bool plan_on_device(const Model& model, RunRequest& r, PlannedRun& run) {
  InventoryRequest ir{r.n_ctx, r.mode,           r.kv, r.profile, r.logits_rows,
                      r.n_seq, r.front_end_bytes};
  ir.threads = r.threads;
  const Inventory inv = take_inventory(model, ir);
  const DeviceFacts facts = device_facts(model, inv, r);
  run.device = choose_device(r.device, facts);
  if (run.device.kind == DeviceKind::Cuda && !r.vram_bandwidth_given &&
      facts.gpu_peak_bytes_per_s > 0)
    r.costs.vram_bytes_per_s = kReadShareOfPeak * facts.gpu_peak_bytes_per_s;
  if (!run.device.note.empty()) run.notes.push_back(run.device.note);
  if (run.device.kind != DeviceKind::Cpu && r.plan != nullptr &&
      !uses_device(plan_from_json(*r.plan, inv))) {
    run.device = {};
    run.notes.push_back("note: the plan places nothing on the GPU; running on the CPU");
  }
  if (run.device.kind == DeviceKind::Cpu) return false;
  run.inventory = inv;
  if (r.plan != nullptr) {
    // The saved plan decides, as the solver would have: a split between the devices.
    run.plan = saved_device_plan(model, inv, r, run.device);
    run.device.split = true;
    run.device.gpu_layers = 0;
    keep_what_the_device_declines(model, run);
    apply_device_plan(run.plan, run.session);
  } else if (run.device.gpu_layers > 0) {
    run.plan = plan_gpu_layers(model, inv, r, run.device);
    keep_what_the_device_declines(model, run);
    host_layers_of(run.plan, run.session);
  } else if (run.device.split) {
    run.plan = plan_split(model, inv, r, run.device);
    keep_what_the_device_declines(model, run);
    if (!uses_device(run.plan)) {
      run.device = {};
      run.notes.push_back(fmt::format(
          "note: the placement solver puts nothing on the GPU: its cost model predicts the CPU "
          "alone faster for this model ({:.1f} tok/s); running on the CPU",
          evaluate(run.plan, inv, r.costs).tokens_per_s()));
      return false;
    }
    apply_device_plan(run.plan, run.session);
  } else {
    run.plan = plan_whole_gpu(inv, {r.budgets.ram, run.device.budget}, r.costs);
    if (keep_what_the_device_declines(model, run)) host_layers_of(run.plan, run.session);
  }
  if (!uses_device(run.plan)) {  // the device declined every layer and the output head
    run.device = {};
    run.session.host_layers.clear();
    run.session.output_on_host = false;
    return false;
  }
  if (run.device.split && r.lookahead_asked)
    run.notes.push_back(
        "note: --lookahead reads ahead for a flash tier that computes alone; below a GPU's "
        "part it does nothing");
  run.plan.predicted = evaluate(run.plan, run.inventory, r.costs);
  return true;
}

}  // namespace strata
