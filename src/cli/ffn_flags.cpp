#include "cli/ffn_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "placement/plan.h"
#include "runtime/ffn_report.h"

namespace strata {

void add_ffn_flags(CLI::App* cmd, FfnFlags& flags) {
  cmd->add_option("--lora", flags.lora,
                  "LoRA adapter (llama.cpp's GGUF adapter file), FILE[:SCALE]; comma-separated "
                  "or repeated for several")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--lora-scaled", flags.lora_scaled,
                  "LoRA adapters with their scales, FILE:SCALE[,FILE:SCALE...]")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--ffn", flags.mode,
                  "FFN mode: dense, predict (predictors pick the neurons; default when the model "
                  "has them), gate-first (exact; ReLU-family models), auto")
      ->check(CLI::IsMember({"auto", "dense", "predict", "gate-first"}));
  cmd->add_option("--sparsity-mode", flags.sparsity_mode,
                  "Training-free activation sparsity with the thresholds strata sparsify wrote "
                  "into the model: teal (every matrix input), cats (the FFN's gate), off")
      ->check(CLI::IsMember({"off", "teal", "cats"}));
  cmd->add_option("--sparsity", flags.run.sparsity.level,
                  "The model-wide sparsity level whose thresholds apply (one the model was "
                  "calibrated for; default: its only one)")
      ->check(CLI::Range(0.0f, 0.99f));
  cmd->add_flag(
      "--input-columns", flags.run.input_columns,
      "With --sparsity-mode teal: decode reads only the columns of the "
      "non-zero inputs, through transposed copies of the attention and FFN matrices "
      "made at load (twice the layers' memory, a GPU's layers' in its memory too; "
      "F16/BF16/F32 matrices transposed, quantized ones (Q8_0, Q4_0, Q2_K..Q6_K) as column "
      "groups of the file's values, docs/INPUT_SPARSITY.md)");
  cmd->add_flag("--check-predictor", flags.run.check_predictor,
                "Predict mode: also compute the true activations and report the predictor's "
                "recall and precision (slower)");
  cmd->add_option("--ram-budget", flags.ram_budget,
                  "Hard cap on the memory strata keeps (e.g. 16G): weights, KV cache, buffers "
                  "and, for bundled models, the neuron caches")
      ->check(kNotEmpty);
  cmd->add_option("--storage-profile", flags.storage_profile,
                  "Bundled models: disk measurements from strata probe-storage (default: "
                  "MODEL.storage.json when it exists)");
  cmd->add_option("--profile", flags.profile,
                  "A strata profile of the model (or of the file it was bundled from): the "
                  "placement solver puts its hottest neurons in the fastest tier");
  cmd->add_option("--plan", flags.plan,
                  "A placement plan from strata plan -o (instead of solving)");
  cmd->add_option("--solver", flags.solver,
                  "Placement solver: ilp (the cost model's optimum; needs --profile), greedy "
                  "(the cache is what the budget leaves, --pin-share of it pinned), auto (ilp "
                  "when a profile gives it a choice)")
      ->check(CLI::IsMember({"auto", "greedy", "ilp"}));
  cmd->add_option("--pin-share", flags.run.solver_options.pin_share,
                  "Greedy solver with --profile: share of each layer's neuron cache pinned")
      ->check(in_range(0.0, 0.95));
  cmd->add_option("--ram-bandwidth", flags.ram_bandwidth,
                  "Cost model: RAM read bandwidth in GB/s (default 40; strata bench measures it)")
      ->check(in_range(0.001, 1e6));
  cmd->add_option("--vram-bandwidth", flags.vram_bandwidth,
                  "Cost model: GPU memory bandwidth in GB/s (default 1000; on a GPU, 85% of "
                  "its peak)")
      ->check(in_range(0.001, 1e6));
  cmd->add_option("--link-bandwidth", flags.link_bandwidth,
                  "Cost model: host-GPU link bandwidth in GB/s (default 25, PCIe 4.0 x16)")
      ->check(in_range(0.001, 1e6));
  cmd->add_flag("--verbose", flags.verbose, "Print the placement plan layer by layer");
  cmd->add_flag(
      "!--no-repack", flags.run.repack,
      "Keep Q4_0/Q8_0/Q4_K weights in the file's row layout instead of interleaving them by 16 "
      "rows at load (llama.cpp's --no-repack)");
  cmd->add_option("--cache-type-k", flags.cache_type_k,
                  "KV cache type for keys: f32, f16 (half the memory), q8_0 or q4_0 (llama.cpp's "
                  "blocks, CPU); default f32, f16 on a GPU");
  cmd->add_option("--cache-type-v", flags.cache_type_v,
                  "KV cache type for values: f32, f16 (half the memory), q8_0 or q4_0 (llama.cpp's "
                  "blocks, CPU); default f32, f16 on a GPU");
  cmd->add_flag("--lookahead", flags.lookahead,
                "Bundled models: read the next layer's guessed neurons while this layer's FFN "
                "and the next attention compute (the default for a flash tier the CPU computes "
                "alone)");
  cmd->add_flag("--no-lookahead", flags.no_lookahead,
                "Bundled models: read each layer's neurons only once its predictor has run");
  cmd->add_flag("--split-reads", flags.run.flash.split_reads,
                "Bundled models: read a missing neuron's gate row first and the rest only if it "
                "fires (fewer bytes, one more round of reads per layer)");
  cmd->add_option("--ubatch-size", flags.run.ubatch,
                  "Tokens per batch through the layers (-ub, llama.cpp's name): default 64, 512 "
                  "for a bundled model on the CPU (a batch reads its neurons from flash once); "
                  "more than 64 on the CPU alone")
      ->check(in_range(1, 512));
  cmd->add_option("--window", flags.run.flash.window,
                  "Bundled models: tokens a neuron stays cached after its last use")
      ->check(in_range(1, 1 << 20));
}

void add_gpu_flags(CLI::App* cmd, FfnFlags& flags) {
  cmd->add_option("--n-gpu-layers,--gpu-layers", flags.run.device.gpu_layers,
                  "Layers on the GPU (-ngl, llama.cpp's name): the model's layer count or more "
                  "puts the whole model there; 0 (default) the CPU")
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--vram-budget", flags.vram_budget,
                  "GPU memory strata may hold (e.g. 8G): a hard limit including the KV cache and "
                  "buffers; alone, the whole model goes to the GPU when it fits")
      ->check(kNotEmpty);
  // "reference" (the reference device, backends/refdev) and "cuda-emu" (the CUDA backend on the
  // emulated GPU, backends/cuda/emu) are for tests and go unlisted.
  cmd->add_option("--device", flags.run.device.device,
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
  if (!t || (*t != DType::F32 && *t != DType::F16 && *t != DType::Q8_0 && *t != DType::Q4_0))
    fail("{} '{}' is not one of f32, f16, q8_0, q4_0", flag, name);
  return *t;
}

namespace {

// --ffn; none for auto (resolved against the model: engine/engine.h).
std::optional<FfnMode> mode_of(const FfnFlags& flags) {
  if (flags.mode == "predict") return FfnMode::Predict;
  if (flags.mode == "gate-first") return FfnMode::GateFirst;
  if (flags.mode == "dense") return FfnMode::Dense;
  return std::nullopt;
}

SolverChoice solver_of(const std::string& name) {
  if (name == "greedy") return SolverChoice::Greedy;
  if (name == "ilp") return SolverChoice::Ilp;
  return SolverChoice::Auto;
}

}  // namespace

EngineOptions engine_options(const FfnFlags& flags, const std::string& model, bool mmap,
                             int threads) {
  EngineOptions options;
  options.model_path = model;
  options.load = mmap ? LoadMode::Map : LoadMode::Read;
  options.threads = checked_threads(threads);
  options.ffn_mode = mode_of(flags);
  options.files = {flags.profile, flags.plan, flags.storage_profile};
  options.run = flags.run;  // the flags bound to it; the text of the rest parsed below
  RunRequest& r = options.run;
  r.kv = {kv_type_or_f32(flags.cache_type_k, "--cache-type-k"),
          kv_type_or_f32(flags.cache_type_v, "--cache-type-v")};
  r.kv_types_given = !flags.cache_type_k.empty() || !flags.cache_type_v.empty();
  if (!flags.ram_budget.empty()) r.budgets.ram = parse_bytes(flags.ram_budget, "--ram-budget");
  if (!flags.vram_budget.empty()) r.budgets.vram = parse_bytes(flags.vram_budget, "--vram-budget");
  r.solver = solver_of(flags.solver);
  if (flags.ram_bandwidth > 0) r.costs.ram_bytes_per_s = flags.ram_bandwidth * 1e9;
  if (flags.vram_bandwidth > 0) r.costs.vram_bytes_per_s = flags.vram_bandwidth * 1e9;
  r.vram_bandwidth_given = flags.vram_bandwidth > 0;
  if (flags.link_bandwidth > 0) r.costs.link_bytes_per_s = flags.link_bandwidth * 1e9;
  if (flags.lookahead && flags.no_lookahead)
    fail("--lookahead and --no-lookahead contradict each other");
  r.flash.lookahead = !flags.no_lookahead;
  r.lookahead_asked = flags.lookahead;
  r.sparsity.mode = parse_sparsity_mode(flags.sparsity_mode);
  if (r.input_columns && r.sparsity.mode != SparsityMode::Teal)
    fail("--input-columns reads TEAL's thresholded inputs: add --sparsity-mode teal");
  for (const std::string& list : flags.lora)
    for (LoraFile& f : parse_lora_list(list, false, "--lora")) options.lora.push_back(std::move(f));
  for (const std::string& list : flags.lora_scaled)
    for (LoraFile& f : parse_lora_list(list, true, "--lora-scaled"))
      options.lora.push_back(std::move(f));
  return options;
}

void print_note(const std::string& note) {
  fmt::print(stderr, "{}\n", note);
}

void announce_plan(const PlannedRun& run, const FfnFlags& flags) {
  // `bench` and `plan` state the speed the plan predicts; a run prints what it measured.
  fmt::print(stderr, "{}\n", plan_summary(run.plan, run.inventory, PredictionShown::No));
  if (flags.verbose) print_plan_layers(run.plan, run.inventory, stderr);
}

void print_plan_layers(const PlacementPlan& p, const Inventory& inv, std::FILE* out) {
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerPlan& lp = p.layers[l];
    fmt::print(out, "  layer {:>3}: attention {}, {} neurons in VRAM, {} pinned", l,
               lp.attention == Device::Accelerator ? "GPU" : "CPU", lp.vram.size(),
               lp.pinned.size());
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
