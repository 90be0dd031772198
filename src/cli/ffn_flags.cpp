#include "cli/ffn_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/matvec.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "offline/profile.h"
#include "placement/plan.h"
#include "tiers/bundle_layout.h"

namespace strata {

void add_ffn_flags(CLI::App* cmd, FfnFlags& f) {
  cmd->add_option("--ffn", f.mode,
                  "FFN mode: dense, predict (predictors pick the neurons; default when the model "
                  "has them), gate-first (exact; ReLU-family models), auto")
      ->check(CLI::IsMember({"auto", "dense", "predict", "gate-first"}));
  cmd->add_option("--sparsity-mode", f.sparsity_mode,
                  "Training-free activation sparsity with the thresholds strata sparsify wrote "
                  "into the model: teal (every matrix input), cats (the FFN's gate), off")
      ->check(CLI::IsMember({"off", "teal", "cats"}));
  cmd->add_option("--sparsity", f.sparsity,
                  "The model-wide sparsity level whose thresholds apply (one the model was "
                  "calibrated for; default: its only one)")
      ->check(CLI::Range(0.0f, 0.99f));
  cmd->add_flag(
      "--input-columns", f.input_columns,
      "With --sparsity-mode teal: decode reads only the columns of the "
      "non-zero inputs, through transposed copies of the attention and FFN matrices "
      "made at load (twice the layers' memory, a GPU's layers' in its memory too; "
      "F16/BF16/F32 matrices transposed, quantized ones (Q8_0, Q4_0, Q2_K..Q6_K) as column "
      "groups of the file's values, docs/INPUT_SPARSITY.md)");
  cmd->add_flag("--check-predictor", f.check_predictor,
                "Predict mode: also compute the true activations and report the predictor's "
                "recall and precision (slower)");
  cmd->add_option("--ram-budget", f.ram_budget,
                  "Hard cap on the memory strata keeps (e.g. 16G): weights, KV cache, buffers "
                  "and, for bundled models, the neuron caches")
      ->check(kNotEmpty);
  cmd->add_option("--storage-profile", f.storage_profile,
                  "Bundled models: disk measurements from strata probe-storage (default: "
                  "MODEL.storage.json when it exists)");
  cmd->add_option("--profile", f.profile,
                  "A strata profile of the model (or of the file it was bundled from): the "
                  "placement solver puts its hottest neurons in the fastest tier");
  cmd->add_option("--plan", f.plan, "A placement plan from strata plan -o (instead of solving)");
  cmd->add_option("--solver", f.solver,
                  "Placement solver: ilp (the cost model's optimum; needs --profile), greedy "
                  "(the cache is what the budget leaves, --pin-share of it pinned), auto (ilp "
                  "when a profile gives it a choice)")
      ->check(CLI::IsMember({"auto", "greedy", "ilp"}));
  cmd->add_option("--pin-share", f.pin_share,
                  "Greedy solver with --profile: share of each layer's neuron cache pinned")
      ->check(in_range(0.0, 0.95));
  cmd->add_option("--ram-bandwidth", f.ram_bandwidth,
                  "Cost model: RAM read bandwidth in GB/s (default 40; strata bench measures it)")
      ->check(in_range(0.001, 1e6));
  cmd->add_option("--vram-bandwidth", f.vram_bandwidth,
                  "Cost model: GPU memory bandwidth in GB/s (default 1000; on a GPU, 85% of "
                  "its peak)")
      ->check(in_range(0.001, 1e6));
  cmd->add_option("--link-bandwidth", f.link_bandwidth,
                  "Cost model: host-GPU link bandwidth in GB/s (default 25, PCIe 4.0 x16)")
      ->check(in_range(0.001, 1e6));
  cmd->add_flag("--verbose", f.verbose, "Print the placement plan layer by layer");
  cmd->add_flag(
      "!--no-repack", f.repack,
      "Keep Q4_0/Q8_0/Q4_K weights in the file's row layout instead of interleaving them by 16 "
      "rows at load (llama.cpp's --no-repack)");
  cmd->add_option("--cache-type-k", f.cache_type_k,
                  "KV cache type for keys: f32 or f16 (half the memory); default f32, f16 on a "
                  "GPU");
  cmd->add_option("--cache-type-v", f.cache_type_v,
                  "KV cache type for values: f32 or f16 (half the memory); default f32, f16 on "
                  "a GPU");
  cmd->add_flag("--lookahead", f.lookahead,
                "Bundled models: read the next layer's guessed neurons while this layer's FFN "
                "and the next attention compute (the default for a flash tier the CPU computes "
                "alone)");
  cmd->add_flag("--no-lookahead", f.no_lookahead,
                "Bundled models: read each layer's neurons only once its predictor has run");
  cmd->add_flag("--split-reads", f.split_reads,
                "Bundled models: read a missing neuron's gate row first and the rest only if it "
                "fires (fewer bytes, one more round of reads per layer)");
  cmd->add_option("--window", f.window,
                  "Bundled models: tokens a neuron stays cached after its last use")
      ->check(in_range(1, 1 << 20));
}

void add_gpu_flags(CLI::App* cmd, FfnFlags& f) {
  cmd->add_option("--n-gpu-layers,--gpu-layers", f.gpu_layers,
                  "Layers on the GPU (-ngl, llama.cpp's name): the model's layer count or more "
                  "puts the whole model there; 0 (default) the CPU")
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--vram-budget", f.vram_budget,
                  "GPU memory strata may hold (e.g. 8G): a hard limit including the KV cache and "
                  "buffers; alone, the whole model goes to the GPU when it fits")
      ->check(kNotEmpty);
  // "reference" (the reference device, backends/refdev) and "cuda-emu" (the CUDA backend on the
  // emulated GPU, backends/cuda/emu) are for tests and go unlisted.
  cmd->add_option("--device", f.device,
                  "cpu, or cuda: the whole model on the GPU (an error where none can be used)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference", "cuda-emu"}));
}

DType kv_type_or_f32(const std::string& name, const char* flag) {
  return name.empty() ? DType::F32 : kv_type(name, flag);
}

uint64_t parse_bytes(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    fail("{} '{}' is not a size (e.g. 16G, 1500M, 123456)", flag, text);
  }
  std::string unit = text.substr(used);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    fail("{} '{}' has an unknown unit (K, M, G)", flag, text);
  if (!(value > 0) || value * mult > 1e18) fail("{} '{}' is out of range", flag, text);
  return static_cast<uint64_t>(value * mult);
}

DType kv_type(const std::string& name, const char* flag) {
  const auto t = dtype_from_name(name);
  if (!t || (*t != DType::F32 && *t != DType::F16))
    fail("{} '{}' is not one of f32, f16", flag, name);
  return *t;
}

namespace {

FfnMode mode_of(const FfnFlags& f, const Model& model) {
  if (f.mode == "predict") return FfnMode::Predict;
  if (f.mode == "gate-first") return FfnMode::GateFirst;
  if (f.mode == "dense") return FfnMode::Dense;
  // auto: input sparsity thresholds the dense FFN's inputs.
  if (f.sparsity_mode != "off") return FfnMode::Dense;
  return model.weights.has_predictors ? FfnMode::Predict : FfnMode::Dense;
}

SolverChoice solver_of(const std::string& name) {
  if (name == "greedy") return SolverChoice::Greedy;
  if (name == "ilp") return SolverChoice::Ilp;
  return SolverChoice::Auto;
}

// The profile's counts, checked against the model (or the file it was bundled from).
ActivationCounts read_counts(const Model& model, const std::string& path) {
  std::string hash = model.file->get_string(kBundleSourceHashKey, "");
  if (model.weights.bundled && hash.empty())
    fail("'{}' does not say which file it was bundled from; bundle it again to use --profile",
         model.file->path());
  if (hash.empty()) hash = model_hash(model);
  NeuronProfile p = read_profile(path, hash);
  return ActivationCounts{p.tokens,
                          std::move(p.counts),
                          std::move(p.window_reuse),
                          p.ffn_mode == "predict" ? FfnMode::Predict : FfnMode::Dense,
                          std::move(p.selections),
                          p.selected_tokens};
}

// A profile counts what one mode reads; a run of another reads other neurons (predict mode
// reads the predictor's selections, several times the neurons that fire on a sparse model).
void note_profile_mode(const ActivationCounts& counts, FfnMode run, const std::string& path) {
  const bool predict_run = run == FfnMode::Predict;
  if (predict_run == (counts.mode == FfnMode::Predict)) return;
  fmt::print(stderr,
             "note: '{}' counts {}; this {} run reads {}, so its plan may misjudge what is read: "
             "profile with strata profile --ffn {}\n",
             path,
             counts.mode == FfnMode::Predict ? "the predictor's selections"
                                             : "the activations that fire (a dense profile)",
             ffn_mode_name(run),
             predict_run ? "the predictor's selections" : "the activations that fire",
             predict_run ? "predict" : "dense");
}

}  // namespace

RunRequest run_request(const FfnFlags& f, const Model& model, int64_t n_ctx,
                       StorageProfile* storage) {
  RunRequest r;
  r.mode = mode_of(f, model);
  r.check_predictor = f.check_predictor;
  r.n_ctx = n_ctx;
  r.k_type = kv_type_or_f32(f.cache_type_k, "--cache-type-k");
  r.v_type = kv_type_or_f32(f.cache_type_v, "--cache-type-v");
  r.kv_types_given = !f.cache_type_k.empty() || !f.cache_type_v.empty();
  r.device.device = f.device;
  r.device.gpu_layers = f.gpu_layers;
  if (!f.ram_budget.empty()) r.budgets.ram = parse_bytes(f.ram_budget, "--ram-budget");
  if (!f.vram_budget.empty()) r.budgets.vram = parse_bytes(f.vram_budget, "--vram-budget");
  r.solver = solver_of(f.solver);
  r.solver_options.pin_share = f.pin_share;
  if (f.ram_bandwidth > 0) r.costs.ram_bytes_per_s = f.ram_bandwidth * 1e9;
  if (f.vram_bandwidth > 0) r.costs.vram_bytes_per_s = f.vram_bandwidth * 1e9;
  r.vram_bandwidth_given = f.vram_bandwidth > 0;
  if (f.link_bandwidth > 0) r.costs.link_bytes_per_s = f.link_bandwidth * 1e9;
  r.repack = f.repack;
  r.window = f.window;
  if (f.lookahead && f.no_lookahead) fail("--lookahead and --no-lookahead contradict each other");
  r.lookahead = !f.no_lookahead;
  r.lookahead_asked = f.lookahead;
  r.split_reads = f.split_reads;
  r.sparsity_mode = parse_sparsity_mode(f.sparsity_mode);
  r.sparsity_level = f.sparsity;
  r.input_columns = f.input_columns;
  if (f.input_columns && r.sparsity_mode != SparsityMode::Teal)
    fail("--input-columns reads TEAL's thresholded inputs: add --sparsity-mode teal");
  if (storage != nullptr && (model.weights.bundled || model.weights.column_bundled)) {
    const std::string beside = model.file->path() + ".storage.json";
    const std::string file = !f.storage_profile.empty()
                                 ? f.storage_profile
                                 : (is_regular_file(beside) ? beside : std::string());
    if (!file.empty()) {
      *storage = StorageProfile::from_json_file(file);
      r.storage = storage;
      fmt::print(stderr, "storage profile: {} ({} points)\n", file, storage->points.size());
    }
  }
  return r;
}

PlannedRun plan_from_flags(const FfnFlags& f, Model& model, int64_t n_ctx, StorageProfile* storage,
                           bool allow_vram, int64_t logits_rows, int n_seq,
                           uint64_t front_end_bytes) {
  RunRequest r = run_request(f, model, n_ctx, storage);
  r.allow_vram = allow_vram;
  if (!allow_vram) {  // a run: the budget is its device's, not a hybrid plan's
    r.device.vram_budget = r.budgets.vram;
    r.budgets.vram = 0;
  }
  r.logits_rows = logits_rows;
  r.n_seq = n_seq;
  r.front_end_bytes = front_end_bytes;
  ActivationCounts counts;
  if (!f.profile.empty()) {
    counts = read_counts(model, f.profile);
    note_profile_mode(counts, r.mode, f.profile);
    r.profile = &counts;
  }
  nlohmann::json plan;
  if (!f.plan.empty()) {
    try {
      plan = parse_json_bounded(read_regular_file(f.plan, kMaxJsonFileBytes, "plan"),
                                fmt::format("plan '{}'", f.plan));
    } catch (const nlohmann::json::exception& e) {
      fail("plan '{}' is not JSON: {}", f.plan, e.what());
    }
    r.plan = &plan;
  }
  PlannedRun run = allow_vram ? make_plan(model, r) : plan_run(model, r);
  for (const std::string& note : run.notes) fmt::print(stderr, "{}\n", note);
  return run;
}

PlannedRun resolve_ffn_flags(const FfnFlags& f, Model& model, int64_t n_ctx,
                             StorageProfile* storage, int64_t logits_rows, int n_seq,
                             uint64_t front_end_bytes) {
  return plan_from_flags(f, model, n_ctx, storage, false, logits_rows, n_seq, front_end_bytes);
}

void announce_plan(const PlannedRun& run, const FfnFlags& f) {
  fmt::print(stderr, "{}\n", plan_summary(run.plan, run.inventory));
  if (f.verbose) print_plan_layers(run.plan, run.inventory, stderr);
}

void print_plan_layers(const PlacementPlan& p, const Inventory& inv, std::FILE* out) {
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp = p.layers[l];
    fmt::print(out, "  layer {:>3}: attention {}, {} neurons in VRAM, {} pinned", l,
               lp.attention == Device::Cuda ? "GPU" : "CPU", lp.vram.size(), lp.pinned.size());
    if (inv.bundled)
      fmt::print(out, ", {} cache slots of {}", lp.cache_slots, inv.layers[l].n_neurons);
    fmt::print(out, "\n");
    // A mixture: where each expert's neurons are (of inv.expert_neurons each).
    for (const auto& [what, ids] : {std::pair{"pinned", &lp.pinned}, {"in VRAM", &lp.vram}})
      if (inv.expert_neurons > 0 && !ids->empty())
        fmt::print(
            out, "             {} by expert (of {} each): {}\n", what, inv.expert_neurons,
            fmt::join(neurons_per_expert(*ids, inv.expert_neurons, inv.layers[l].n_neurons), " "));
  }
}

std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before) {
  std::vector<FfnLayerStats> d = after;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i].computed -= before[i].computed;
    d[i].nonzero -= before[i].nonzero;
    d[i].rows_read -= before[i].rows_read;
    d[i].truly_active -= before[i].truly_active;
    d[i].predicted -= before[i].predicted;
    d[i].predicted_and_active -= before[i].predicted_and_active;
  }
  return d;
}

namespace {

// A mixture's experts: dense, the k chosen experts whole; gate-first, their deciding rows whole
// and the firing neurons' other rows; predict, the predictor (fc2's rows of the k chosen
// experts) and the predicted neurons' rows (counted per token, as a dense layer's).
uint64_t mixture_bytes_per_token(const Model& model, const LayerWeights& l, FfnMode mode,
                                 const FfnLayerStats& stats, double tokens) {
  const ExpertMatrices& x = l.experts[0];
  const auto k = static_cast<uint64_t>(model.config.n_expert_used);
  const auto n_expert = static_cast<uint64_t>(model.config.n_expert);
  const bool gated = ffn_has_gate(model.config.ffn);
  if (mode == FfnMode::Dense) return k * (x.gate.bytes() + x.up.bytes() + x.down.bytes());
  const double per_token = tokens > 0 ? static_cast<double>(stats.computed) / tokens : 0.0;
  if (mode == FfnMode::Predict) {
    const uint64_t row = x.gate.row_bytes + x.up.row_bytes + l.ffn_down_t.row_bytes;
    return l.predictor.fc1.bytes() + l.predictor.fc2.bytes() / n_expert * k +
           static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  const uint64_t row = (gated ? x.up.row_bytes : 0) + l.ffn_down_t.row_bytes;
  return k * (gated ? x.gate.bytes() : x.up.bytes()) +
         static_cast<uint64_t>(per_token * static_cast<double>(row));
}

}  // namespace

uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens) {
  const ModelWeights& w = model.weights;
  uint64_t total = w.output.bytes() + w.token_embd.row_bytes;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    total += l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes() + l.attn_output.bytes();
    if (!l.experts.empty()) {
      total += l.ffn_gate_inp.bytes() + mixture_bytes_per_token(model, l, mode, stats[i], tokens);
      continue;
    }
    if (mode == FfnMode::Dense) {
      total += l.ffn_gate.bytes() + l.ffn_up.bytes() +
               (l.ffn_down.data != nullptr ? l.ffn_down.bytes() : l.ffn_down_t.bytes());
      continue;
    }
    const double per_token = tokens > 0 ? static_cast<double>(stats[i].computed) / tokens : 0.0;
    uint64_t row = l.ffn_up.row_bytes + l.ffn_down_t.row_bytes;
    if (mode == FfnMode::Predict) {
      row += l.ffn_gate.row_bytes;
      total += l.predictor.fc1.bytes() + l.predictor.fc2.bytes();
    } else {
      total += ffn_has_gate(model.config.ffn) ? l.ffn_gate.bytes() : 0;
    }
    total += static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  return total;
}

uint64_t input_sparse_bytes_per_token(const Model& model,
                                      const std::vector<InputDensity>& density) {
  const ModelWeights& w = model.weights;
  double total = static_cast<double>(w.output.bytes() + w.token_embd.row_bytes);
  for (size_t i = 0; i < w.layers.size() && i < model.columns.size(); ++i) {
    const LayerColumns& c = model.columns[i];
    const InputDensity& d = density[i];
    auto share = [&](MatrixInput k) {
      const auto p = static_cast<size_t>(k);
      return d.seen[p] > 0 ? static_cast<double>(d.kept[p]) / static_cast<double>(d.seen[p]) : 1.0;
    };
    // A fused copy's parts have empty views (LayerColumns): either side is the whole input's.
    total +=
        share(MatrixInput::Attention) * static_cast<double>(c.attn_qkv.bytes() + c.attn_q.bytes() +
                                                            c.attn_k.bytes() + c.attn_v.bytes());
    total += share(MatrixInput::AttentionOutput) * static_cast<double>(c.attn_output.bytes());
    total += share(MatrixInput::Ffn) *
             static_cast<double>(c.ffn_gate_up.bytes() + c.ffn_gate.bytes() + c.ffn_up.bytes());
    // Inputs without copies (column_products_pay) read their row-major matrices whole.
    const LayerWeights& l = w.layers[i];
    if (!c.attention())
      total += static_cast<double>(l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes());
    if (c.attn_output.data == nullptr) total += static_cast<double>(l.attn_output.bytes());
    if (!c.ffn(ffn_has_gate(model.config.ffn)))
      total += static_cast<double>(l.ffn_gate.bytes() + l.ffn_up.bytes());
    total += c.ffn_down.data != nullptr
                 ? share(MatrixInput::FfnHidden) * static_cast<double>(c.ffn_down.bytes())
                 : static_cast<double>(l.ffn_down.data != nullptr ? l.ffn_down.bytes()
                                                                  : l.ffn_down_t.bytes());
  }
  return static_cast<uint64_t>(total);
}

namespace {
// Input sparsity (--sparsity-mode): per matrix input (TEAL) or of the gate's activations (CATS)
// the share of values kept over every layer and token (1 where a threshold of 0 drops nothing),
// and the share of the layers' weights whose input values were
// non-zero (what column-sparse products need to read).
nlohmann::json input_sparsity_json(const Model& model, const Session& session) {
  const SessionOptions& o = session.options();
  if (o.sparsity_mode == SparsityMode::Off) return nullptr;
  const ModelConfig& c = model.config;
  nlohmann::json density = nlohmann::json::object();
  double needed = 0, all = 0;
  for (int p = 0; p < kSparsityPoints; ++p) {
    uint64_t seen = 0, kept = 0;
    for (const InputDensity& d : session.input_density()) {
      seen += d.seen[static_cast<size_t>(p)];
      kept += d.kept[static_cast<size_t>(p)];
    }
    const double share = seen > 0 ? static_cast<double>(kept) / static_cast<double>(seen) : 1.0;
    if (p == kGatePoint) {
      if (o.sparsity_mode == SparsityMode::Cats) density["ffn_gate_activation"] = share;
      continue;
    }
    const auto which = static_cast<MatrixInput>(p);
    if (o.sparsity_mode == SparsityMode::Teal) density[matrix_input_name(which)] = share;
    const double weights = static_cast<double>(matrix_input_weights(which, c));
    all += weights;
    needed += weights * share;
  }
  if (o.sparsity_mode == SparsityMode::Cats) {
    // CATS: the gate is read whole; up rows and down columns only where the gate is kept.
    const double share = density["ffn_gate_activation"].get<double>();
    const double gate = static_cast<double>(c.n_embd * c.n_ff);
    needed = all - 2 * gate * (1 - share) - static_cast<double>(c.n_ff * c.n_embd) * (1 - share);
  }
  return {{"mode", sparsity_mode_name(o.sparsity_mode)},
          {"level", o.sparsity_level},
          {"density", density},
          {"layer_weights_needed", all > 0 ? needed / all : 1.0}};
}

nlohmann::json flash_json(const Session& session) {
  const NeuronCacheStats s = session.flash_stats();
  const double tokens = static_cast<double>(std::max<uint64_t>(1, session.tokens_evaluated()));
  const double requests = static_cast<double>(s.hits + s.misses);
  return {{"bytes_read_per_token", s.bytes_read / tokens},
          {"pinned_bytes", s.pin_bytes},
          {"reads_per_token", s.reads / tokens},
          {"cache_hit_rate", requests > 0 ? s.hits / requests : 0.0},
          {"io_wait_s", s.read_seconds},
          {"bytes_read", s.bytes_read},
          {"evictions", s.evictions},
          {"cache_slots_per_layer",
           session.neuron_caches().empty() ? 0 : session.neuron_caches()[0]->capacity()}};
}
}  // namespace

nlohmann::json ffn_report_json(const Model& model, const Session& session) {
  const double total = static_cast<double>(session.ffn_activations_per_layer());
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < session.ffn_stats().size(); ++i) {
    const FfnLayerStats& s = session.ffn_stats()[i];
    nlohmann::json l = {{"layer", i},
                        {"computed_density", total > 0 ? s.computed / total : 0.0},
                        {"nonzero_density", total > 0 ? s.nonzero / total : 0.0}};
    if (session.options().check_predictor) {
      l["true_density"] = total > 0 ? s.truly_active / total : 0.0;
      l["recall"] = s.truly_active ? double(s.predicted_and_active) / s.truly_active : 1.0;
      l["precision"] = s.predicted ? double(s.predicted_and_active) / s.predicted : 1.0;
    }
    if (model.weights.layers[i].predictor.present())
      l["predictor_rank"] = model.weights.layers[i].predictor.rank();
    layers.push_back(l);
  }
  const ForwardTimes& t = session.times();
  nlohmann::json flash = nullptr;
  if (!session.neuron_caches().empty()) flash = flash_json(session);
  // A split FFN: where the activations were computed (PowerInfer's GPU share).
  nlohmann::json split = nullptr;
  const double on_device = static_cast<double>(session.split_device_pairs());
  const double in_ram = static_cast<double>(session.split_ram_pairs());
  if (!session.options().vram_neurons.empty()) {
    const Session::SplitTraffic t = session.split_traffic();
    const double tokens = std::max<double>(1.0, static_cast<double>(session.tokens_evaluated()));
    split = {{"device_activations", on_device},
             {"ram_activations", in_ram},
             {"device_share", on_device + in_ram > 0 ? on_device / (on_device + in_ram) : 0.0},
             {"per_token_over_all_tokens",
              {{"device_neuron_bytes", t.device_row_bytes / tokens},
               {"ram_neuron_bytes", t.ram_row_bytes / tokens},
               {"flash_bytes", static_cast<double>(session.flash_stats().bytes_read) / tokens},
               {"link_bytes", t.link_bytes / tokens}}},
             {"time_s",
              {{"device_part", session.times().ffn_device_part},
               {"ram_part", session.times().ffn_ram_part},
               {"cpu_waiting_for_device", session.times().ffn_host_waits},
               {"device_waiting_for_cpu", session.times().ffn_device_waits}}}};
  }
  return {{"ffn_mode", ffn_mode_name(session.options().ffn)},
          {"input_sparsity", input_sparsity_json(model, session)},
          {"flash", flash},
          {"split", split},
          {"layers", layers},
          {"time_s",
           {{"attention", t.attention},
            {"predictor", t.predictor},
            {"ffn", t.ffn},
            {"output", t.output}}}};
}

std::string input_sparsity_line(const nlohmann::json& s) {
  std::string kept;
  for (const auto& [name, share] : s["density"].items())
    kept += fmt::format("{}{} {:.1f}%", kept.empty() ? "" : ", ", name, 100 * share.get<double>());
  return fmt::format(
      "input sparsity {} at {:g}: values kept {}; the layers' weights with a non-zero input: "
      "{:.1f}%",
      s["mode"].get<std::string>(), s["level"].get<double>(), kept,
      100 * s["layer_weights_needed"].get<double>());
}

std::string split_report_line(const nlohmann::json& split) {
  const auto& per = split["per_token_over_all_tokens"];
  const auto& t = split["time_s"];
  const double share = split["device_share"].get<double>();
  const double flash = per["flash_bytes"].get<double>();
  return fmt::format(
      "split FFN: {:.1f}% of the activations computed on the GPU, {:.1f}% on the CPU; per token "
      "(all tokens) neuron rows {:.2f} MiB on the GPU, {:.2f} MiB in RAM{}, {:.1f} KiB over the "
      "link; FFN parts {:.3f} s on the GPU, {:.3f} s on the CPU (at the same time); the CPU "
      "waited {:.3f} s for the GPU, the GPU {:.3f} s for the CPU",
      100 * share, 100 - 100 * share, per["device_neuron_bytes"].get<double>() / 1048576.0,
      per["ram_neuron_bytes"].get<double>() / 1048576.0,
      flash > 0 ? fmt::format(", {:.2f} MiB read from flash", flash / 1048576.0) : "",
      per["link_bytes"].get<double>() / 1024.0, t["device_part"].get<double>(),
      t["ram_part"].get<double>(), t["cpu_waiting_for_device"].get<double>(),
      t["device_waiting_for_cpu"].get<double>());
}

void print_ffn_report(const Model& model, const Session& session, std::FILE* out) {
  const nlohmann::json j = ffn_report_json(model, session);
  const bool check = session.options().check_predictor;
  fmt::print(out, "FFN mode {}: per layer density computed / non-zero{}\n",
             j["ffn_mode"].get<std::string>(), check ? " / true, predictor recall, precision" : "");
  for (const auto& l : j["layers"]) {
    fmt::print(out, "  layer {:>3}: {:.3f} / {:.3f}", l["layer"].get<int>(),
               l["computed_density"].get<double>(), l["nonzero_density"].get<double>());
    if (check)
      fmt::print(out, " / {:.3f}, recall {:.4f}, precision {:.3f}", l["true_density"].get<double>(),
                 l["recall"].get<double>(), l["precision"].get<double>());
    if (l.contains("predictor_rank"))
      fmt::print(out, "  (rank {})", l["predictor_rank"].get<int>());
    fmt::print(out, "\n");
  }
  const auto& t = j["time_s"];
  const double sum = t["attention"].get<double>() + t["predictor"].get<double>() +
                     t["ffn"].get<double>() + t["output"].get<double>();
  auto pct = [&](const char* k) { return sum > 0 ? 100 * t[k].get<double>() / sum : 0.0; };
  fmt::print(
      out, "time: attention {:.1f}%, predictor {:.1f}%, FFN {:.1f}%, output {:.1f}% of {:.3f} s\n",
      pct("attention"), pct("predictor"), pct("ffn"), pct("output"), sum);
  if (!j["split"].is_null()) fmt::print(out, "{}\n", split_report_line(j["split"]));
  if (!j["input_sparsity"].is_null())
    fmt::print(out, "{}\n", input_sparsity_line(j["input_sparsity"]));
  if (!j["flash"].is_null()) {
    const auto& fl = j["flash"];
    fmt::print(out,
               "flash: {:.2f} MiB read per token in {:.1f} reads, cache hit rate {:.3f}, I/O wait "
               "{:.3f} s, {} slots per layer\n",
               fl["bytes_read_per_token"].get<double>() / 1048576.0,
               fl["reads_per_token"].get<double>(), fl["cache_hit_rate"].get<double>(),
               fl["io_wait_s"].get<double>(), fl["cache_slots_per_layer"].get<int64_t>());
  }
}

}  // namespace strata
