// strata bench: prompt and decode throughput as the median of repeats (like llama-bench), with
// the machine's measured read bandwidth and the share of the bandwidth limit decode reaches,
// and its multiply-add rate and the share of the compute limit prompts reach.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "backends/cpu/kernels.h"
#include "cli/bench_speculative.h"
#include "cli/bench_table.h"
#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "placement/cost_model.h"
#include "planning/bandwidth.h"
#include "planning/compute_limit.h"
#include "runtime/session.h"
#include "runtime/timeline_report.h"

namespace strata {

namespace {

struct BenchOptions {
  bool mmap = false;
  std::string model = default_model_path();
  int n_prompt = 64;
  int n_gen = 128;
  int reps = 3;
  int threads = default_threads();
  // As typed (llama-bench's lists: "16,32"); one value each and no format: the full report.
  std::string prompts = "64", gens = "128", thread_list = std::to_string(default_threads());
  std::string format;  // -o: md, csv, json, jsonl (llama-bench's rows)
  bool json = false;
  bool skip_bandwidth = false;
  std::string timeline_html;  // --timeline: the drawing's file
  FfnFlags ffn;
  DraftFlags draft;         // speculative decoding: plain and speculative decode side by side
  std::string prompt_file;  // -f: its prompt's text (default: -p pseudo-random tokens)
};

// What the repeats measured; the decode figures cover decode steps only.
struct BenchResult {
  std::vector<double> pp, tg;  // tok/s per repeat
  std::vector<FfnLayerStats> decode_stats;
  ForwardTimes decode_times;
  double decode_tokens = 0;
  NeuronCacheStats decode_flash;
  // A bundled model's prompts: what their batches read from flash.
  NeuronCacheStats prompt_flash;
  double prompt_tokens = 0;
  // Input-sparse products (TEAL with column copies): each input's share of values kept.
  std::vector<InputDensity> input_density;
  double ms_per_token(double s) const { return decode_tokens > 0 ? 1e3 * s / decode_tokens : 0.0; }
};

// Deterministic pseudo-random prompt tokens.
std::vector<int32_t> bench_prompt(int n, int64_t n_vocab) {
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  uint64_t s = 12345;
  for (auto& t : prompt) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return prompt;
}

int32_t greedy_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double hit_rate(const NeuronCacheStats& s) {
  return s.hits + s.misses > 0
             ? static_cast<double>(s.hits) / static_cast<double>(s.hits + s.misses)
             : 0.0;
}

// Adds the reads between two readings of a session's flash figures to `into`.
void add_flash(NeuronCacheStats& into, const NeuronCacheStats& now,
               const NeuronCacheStats& before) {
  into.hits += now.hits - before.hits;
  into.misses += now.misses - before.misses;
  into.bytes_read += now.bytes_read - before.bytes_read;
  into.reads += now.reads - before.reads;
  into.read_seconds += now.read_seconds - before.read_seconds;
}

// Adds what happened in the session since the `before` figures to the decode totals.
void add_decode(BenchResult& r, const Session& session, const std::vector<FfnLayerStats>& stats,
                const ForwardTimes& times, const NeuronCacheStats& flash) {
  const auto d = stats_difference(session.ffn_stats(), stats);
  for (size_t l = 0; l < d.size(); ++l) {
    r.decode_stats[l].computed += d[l].computed;
    r.decode_stats[l].nonzero += d[l].nonzero;
  }
  const ForwardTimes& now = session.times();
  r.decode_times.attention += now.attention - times.attention;
  r.decode_times.predictor += now.predictor - times.predictor;
  r.decode_times.ffn += now.ffn - times.ffn;
  r.decode_times.output += now.output - times.output;
  add_flash(r.decode_flash, session.flash_stats(), flash);
}

// `timeline` (null: none) keeps the last repetition's decode tokens.
BenchResult measure(Session& session, const BenchOptions& o, const ModelConfig& c,
                    Timeline* timeline) {
  BenchResult r;
  r.decode_stats.resize(static_cast<size_t>(c.n_layer));
  const std::vector<int32_t> prompt = bench_prompt(o.n_prompt, c.n_vocab);
  session.eval(prompt.empty() ? 1 : prompt[0]);  // warm-up: maps every weight page
  for (int rep = 0; rep < o.reps; ++rep) {
    session.reset();
    int32_t next = 1;
    if (o.n_prompt > 0) {
      const NeuronCacheStats before = session.flash_stats();
      Timer t;
      next = greedy_token(session.eval(prompt));
      r.pp.push_back(o.n_prompt / t.seconds());
      add_flash(r.prompt_flash, session.flash_stats(), before);
      r.prompt_tokens += o.n_prompt;
    }
    if (o.n_gen == 0) continue;
    const auto stats = session.ffn_stats();
    const ForwardTimes times = session.times();
    const NeuronCacheStats flash = session.flash_stats();
    if (timeline != nullptr) timeline->clear();
    session.set_timeline(timeline);
    Timer t;
    for (int i = 0; i < o.n_gen; ++i) next = greedy_token(session.eval(next));
    session.set_timeline(nullptr);
    r.tg.push_back(o.n_gen / t.seconds());
    add_decode(r, session, stats, times, flash);
    r.decode_tokens += o.n_gen;
  }
  if (session.options().sparsity.mode == SparsityMode::Teal)
    r.input_density = session.input_density();
  return r;
}

// The report's figures derived from a result.
struct BenchFigures {
  double pp = 0, tg = 0;  // medians
  uint64_t bytes = 0;     // weights read per decode token
  double density = 0;     // mean share of FFN neurons computed per decode token
  double bandwidth = 0, limit = 0;
  std::string bandwidth_note;  // how the bandwidth was measured, or why not
  double memory = 0;           // the memory's streaming rate (beside the kernels')
  std::string memory_note;
  std::string type;
  // Prompts against the compute limit (planning/compute_limit.h): multiply-adds per prompt
  // token, the rate that bounds them and with which instruction, the tok/s that rate allows.
  double prompt_macs = 0;
  ComputeRate compute;
  double amx_macs_per_s = 0, amx_f16_macs_per_s = 0, compute_limit = 0;
};

// The FFN's weight type names the file (a mixture's: its experts').
DType ffn_weight_type(const ModelWeights& w) {
  return w.layers.empty()                     ? w.output.type
         : !w.layers[0].experts.empty()       ? w.layers[0].experts[0].up.type
         : w.layers[0].ffn_up.data != nullptr ? w.layers[0].ffn_up.type
                                              : w.layers[0].attn_q.type;
}

BenchFigures figures(const BenchResult& r, const Model& model, FfnMode mode,
                     const BandwidthProbe& probe) {
  const double bandwidth = probe.bytes_per_s;
  BenchFigures f;
  f.pp = median_of(r.pp);
  f.tg = median_of(r.tg);
  f.bytes = r.input_density.empty() || model.columns.empty()
                ? bytes_touched_per_token(model, mode, r.decode_stats, r.decode_tokens)
                : input_sparse_bytes_per_token(model, r.input_density);
  // Of the neurons a dense FFN computes per token (a mixture's: its k experts').
  const double dense = static_cast<double>(model.config.n_ff) *
                       static_cast<double>(std::max<int64_t>(1, model.config.n_expert_used));
  for (const auto& l : r.decode_stats)
    f.density += r.decode_tokens > 0 ? l.computed / (r.decode_tokens * dense) : 0.0;
  f.density /= static_cast<double>(model.config.n_layer);
  f.bandwidth = bandwidth;
  f.bandwidth_note = probe.note;
  f.memory = probe.memory_bytes_per_s;
  f.memory_note = probe.memory_note;
  f.limit = bandwidth > 0 ? bandwidth / static_cast<double>(f.bytes) : 0.0;
  f.type = dtype_name(ffn_weight_type(model.weights));
  return f;
}

nlohmann::json bench_json(const BenchOptions& o, const BenchResult& r, const BenchFigures& f,
                          const Model& model, const Session& session, const PlannedRun& planned,
                          const PlanPrediction& predicted, double load_s,
                          const TimelineSummary* timeline) {
  const NeuronCacheStats& fl = r.decode_flash;
  const double tokens = std::max(1.0, r.decode_tokens);
  const NeuronCacheStats& pf = r.prompt_flash;
  const double prompt_tokens = std::max(1.0, r.prompt_tokens);
  nlohmann::json j = {
      {"model", o.model},
      {"type", f.type},
      {"threads", o.threads},
      {"kernels", best_kernels().name},
      {"read_ahead", std::string(best_kernels().name) == "scalar"
                         ? "none"
                         : column_read_ahead_name(best_kernels().read_ahead)},
      {"backend", session.backend().name()},
      {"device", planned.device.emulated ? "cuda-emu" : device_kind_name(planned.device.kind)},
      {"device_peak_bytes_per_s", accelerator_of(planned.device) == nullptr
                                      ? 0.0
                                      : accelerator_of(planned.device)->info(0).peak_bytes_per_s},
      {"n_prompt", o.n_prompt},
      {"n_gen", o.n_gen},
      {"ubatch", session.max_batch()},
      {"repetitions", o.reps},
      {"prompt_tokens_per_s", f.pp},
      {"decode_tokens_per_s", f.tg},
      {"prompt_runs", r.pp},
      {"decode_runs", r.tg},
      {"weight_bytes_per_token", f.bytes},
      {"bandwidth_bytes_per_s", f.bandwidth},
      {"bandwidth_probe", f.bandwidth_note},
      {"memory_stream_bytes_per_s", f.memory},
      {"memory_stream_probe", f.memory_note},
      {"bandwidth_limit_tokens_per_s", f.limit},
      {"bandwidth_limit_percent", f.limit > 0 ? 100 * f.tg / f.limit : 0},
      {"prompt_macs_per_token", f.prompt_macs},
      {"compute_macs_per_s", f.compute.macs_per_s},
      {"compute_instruction", f.compute.instruction},
      {"amx_int8_macs_per_s", f.amx_macs_per_s},
      {"amx_f16_macs_per_s", f.amx_f16_macs_per_s},
      {"compute_limit_tokens_per_s", f.compute_limit},
      {"compute_limit_percent", f.compute_limit > 0 ? 100 * f.pp / f.compute_limit : 0},
      {"load_s", load_s},
      {"ffn_mode", ffn_mode_name(planned.session.ffn)},
      {"ffn_density", f.density},
      {"ffn_report", ffn_report_json(model, session)},
      {"plan", plan_summary(planned.plan, planned.inventory)},
      {"plan_predicted_tokens_per_s", predicted.tokens_per_s()},
      {"decode_flash",
       {{"bytes_read_per_token", fl.bytes_read / tokens},
        // The plan's cost model beside what the run read (a bundled model's decode).
        {"plan_predicted_bytes_per_token", planned.plan.predicted.flash_bytes_per_token},
        {"reads_per_token", fl.reads / tokens},
        {"cache_hit_rate", hit_rate(fl)},
        {"io_wait_s_per_token", fl.read_seconds / tokens}}},
      {"prompt_flash",
       {{"bytes_read_per_token", pf.bytes_read / prompt_tokens},
        {"reads_per_token", pf.reads / prompt_tokens},
        {"cache_hit_rate", hit_rate(pf)},
        {"io_wait_s_per_token", pf.read_seconds / prompt_tokens}}},
      {"decode_ms_per_token",
       {{"attention", r.ms_per_token(r.decode_times.attention)},
        {"predictor", r.ms_per_token(r.decode_times.predictor)},
        {"ffn", r.ms_per_token(r.decode_times.ffn)},
        {"output", r.ms_per_token(r.decode_times.output)}}}};
  if (timeline != nullptr) j["decode_timeline"] = timeline_json(*timeline);
  return j;
}

void print_bench(const BenchOptions& o, const BenchResult& r, const BenchFigures& f,
                 const Model& model, const Session& session, FfnMode mode,
                 const PlanPrediction& predicted) {
  const double predicted_flash_bytes = predicted.flash_bytes_per_token;
  fmt::print("model: {} ({}, {} layers, {:.3f} GB read per token), {} threads, {} kernels\n",
             o.model, f.type, model.config.n_layer, f.bytes / 1e9, o.threads,
             kernels_label(best_kernels()));
  if (session.backend().device() != Device::Host)
    fmt::print("device: {}\n", session.backend().name());
  if (session.backend().device() == Device::Accelerator && f.bandwidth > 0 &&
      session.backend().name().starts_with("cuda "))
    fmt::print("GPU memory: {:.0f} GB/s read measured, {:.0f} GB/s peak (memory clock x bus)\n",
               f.bandwidth / 1e9, cuda_accelerator().info(0).peak_bytes_per_s / 1e9);
  if (r.decode_tokens > 0)
    fmt::print(
        "FFN {}: density {:.3f}; decode ms/token: attention {:.2f}, predictor {:.2f}, FFN {:.2f}, "
        "output {:.2f}\n",
        ffn_mode_name(mode), f.density, r.ms_per_token(r.decode_times.attention),
        r.ms_per_token(r.decode_times.predictor), r.ms_per_token(r.decode_times.ffn),
        r.ms_per_token(r.decode_times.output));
  fmt::print("| test   | tok/s (median of {}) | runs |\n|--------|---------------------:|------|\n",
             o.reps);
  if (!r.pp.empty())
    fmt::print("| pp{:<4} | {:>20.2f} | {:.2f} |\n", o.n_prompt, f.pp, fmt::join(r.pp, ", "));
  if (!r.tg.empty())
    fmt::print("| tg{:<4} | {:>20.2f} | {:.2f} |\n", o.n_gen, f.tg, fmt::join(r.tg, ", "));
  if (session.options().check_predictor) print_ffn_report(model, session, stdout);
  if (model.weights.bundled && r.prompt_tokens > 0)
    fmt::print("flash: {:.2f} MiB read per prompt token (batches of {}), cache hit rate {:.3f}\n",
               r.prompt_flash.bytes_read / r.prompt_tokens / 1048576.0, session.max_batch(),
               hit_rate(r.prompt_flash));
  if (model.weights.bundled && r.decode_tokens > 0)
    fmt::print(
        "flash: {:.2f} MiB read per decoded token, the plan predicted {:.2f} MiB; decode {:.2f} "
        "tok/s, the plan predicted {:.2f}\n",
        r.decode_flash.bytes_read / std::max(1.0, r.decode_tokens) / 1048576.0,
        predicted_flash_bytes / 1048576.0, f.tg, predicted.tokens_per_s());
  if (!model.weights.bundled && r.decode_tokens > 0 && predicted.seconds_per_token > 0)
    fmt::print("decode {:.2f} tok/s, the plan predicted {:.2f}\n", f.tg, predicted.tokens_per_s());
  if (model.weights.column_bundled && r.decode_tokens > 0) {
    const NeuronCacheStats& fl = r.decode_flash;
    fmt::print(
        "flash (column bundles): {:.2f} MiB read per decoded token (the plan predicted {:.2f}) "
        "in {:.1f} reads, cache hit rate {:.3f}, the caches hold {:.1f}% of each layer's "
        "columns\n",
        fl.bytes_read / std::max(1.0, r.decode_tokens) / 1048576.0,
        predicted_flash_bytes / 1048576.0,
        static_cast<double>(fl.reads) / std::max(1.0, r.decode_tokens),
        hit_rate(fl), 100.0 * session.options().column_share);
  }
  if (!session.options().vram_neurons.empty())
    fmt::print("{}\n", split_report_line(ffn_report_json(model, session)["split"]));
  if (session.options().sparsity.mode != SparsityMode::Off)
    fmt::print("{}\n", input_sparsity_line(ffn_report_json(model, session)["input_sparsity"]));
  if (f.memory > 0)
    fmt::print("memory read bandwidth: {:.1f} GB/s ({})\n", f.memory / 1e9, f.memory_note);
  else if (!f.memory_note.empty())
    fmt::print("memory read bandwidth: {}\n", f.memory_note);
  if (f.bandwidth > 0)
    fmt::print(
        "weights read at {:.1f} GB/s by {} -> decode limit {:.2f} tok/s{}\n", f.bandwidth / 1e9,
        f.bandwidth_note, f.limit,
        r.tg.empty() ? "" : fmt::format("; decode reaches {:.1f}% of it", 100 * f.tg / f.limit));
  if (f.compute_limit > 0) {
    fmt::print(
        "prompt: {:.3f} GMAC per token; {} at {:.0f} GMAC/s ({} threads) -> prompt limit {:.1f} "
        "tok/s; the prompt reaches {:.1f}% of it",
        f.prompt_macs / 1e9, f.compute.instruction, f.compute.macs_per_s / 1e9, o.threads,
        f.compute_limit, 100 * f.pp / f.compute_limit);
    if (f.amx_macs_per_s > 0 && f.compute.instruction != "AMX tdpbssd")
      fmt::print(" (AMX tdpbssd: {:.0f} GMAC/s)", f.amx_macs_per_s / 1e9);
    fmt::print("\n");
  }
}

// llama-bench's rows: per thread count, a row per prompt size (no decode) and per decode
// length (no prompt).
int run_bench_rows(const BenchOptions& o, const std::vector<int>& prompts,
                   const std::vector<int>& gens, const std::vector<int>& threads) {
  const BenchFormat format = bench_format_from_name(o.format.empty() ? "md" : o.format);
  const int longest = *std::max_element(prompts.begin(), prompts.end()) +
                      *std::max_element(gens.begin(), gens.end());
  if (longest == 0) fail("nothing to measure: -p and -n are all 0");
  std::vector<BenchRow> rows;
  for (int t : threads) {
    EngineOptions engine_opts = engine_options(o.ffn, o.model, o.mmap, t);
    engine_opts.require_tokenizer = false;
    Engine engine(std::move(engine_opts), print_note);
    Session& session = engine.start(longest + 1);
    const Model& model = engine.model();
    BenchRow row;
    row.model_file = o.model;
    row.model_size = model.file->file_size();
    for (const auto& info : model.file->tensors()) row.model_params += info.n_elements;
    row.model_type = fmt::format("{} {} {}", model.config.architecture,
                                 params_label(row.model_params), dtype_name(ffn_weight_type(model.weights)));
    row.backend = engine.backend().device() == Device::Host ? "CPU" : "CUDA";
    row.threads = t;
    auto measure_row = [&](int p, int n) {
      BenchOptions one = o;
      one.n_prompt = p, one.n_gen = n;
      const BenchResult r = measure(session, one, model.config, nullptr);
      row.n_prompt = p, row.n_gen = n, row.samples = p > 0 ? r.pp : r.tg;
      rows.push_back(row);
    };
    for (int p : prompts)
      if (p > 0) measure_row(p, 0);
    for (int n : gens)
      if (n > 0) measure_row(0, n);
  }
  fmt::print("{}", format_bench_rows(rows, format));
  return 0;
}

// --model-draft or --lookup: greedy decode with and without the drafts, alternating.
int run_speculative_bench(const BenchOptions& o) {
  check_draft_flags(o.draft);
  if (o.n_gen < 2) fail("a speculative run measures decode: -n must be at least 2");
  if (o.n_prompt < 1 && o.prompt_file.empty()) fail("a speculative run needs a prompt: -p or -f");
  EngineOptions engine_opts = engine_options(o.ffn, o.model, o.mmap, o.threads);
  engine_opts.require_tokenizer = !o.prompt_file.empty();
  Engine engine(std::move(engine_opts), print_note);
  const std::vector<int32_t> prompt =
      o.prompt_file.empty()
          ? bench_prompt(o.n_prompt, engine.model().config.n_vocab)
          : engine.model().tokenizer->encode(
                read_regular_file(o.prompt_file, kMaxTextFileBytes, "prompt"), true);
  const int64_t n_ctx =
      static_cast<int64_t>(prompt.size()) + o.n_gen + speculation_params(o.draft).draft_max + 1;
  Speculation speculation = start_speculation(o.draft, engine, n_ctx);
  Session& session = engine.start(n_ctx);
  finish_speculation(speculation, o.draft, engine);
  announce_plan(engine.planned(), o.ffn);
  const SpeculativeBench b = measure_speculative(session, speculation, speculation.params, prompt,
                                                 o.n_gen, o.reps);
  const int n_prompt = static_cast<int>(prompt.size());
  if (o.json)
    fmt::print("{}\n", speculative_bench_json(b, speculation, n_prompt, o.n_gen).dump(2));
  else
    fmt::print("{}", speculative_bench_text(b, speculation, n_prompt, o.n_gen));
  return 0;
}

int run_bench(BenchOptions& o) {
  const auto prompts = parse_int_list("-p", o.prompts, 0, 1 << 20);
  const auto gens = parse_int_list("-n", o.gens, 0, 1 << 20);
  const auto threads = parse_int_list("-t", o.thread_list, 1, 1024);
  if (!o.format.empty() || prompts.size() + gens.size() + threads.size() > 3) {
    if (o.json || !o.timeline_html.empty())
      fail("--json and --timeline belong to the single-run report; use -o json for the rows");
    if (o.draft.on()) fail("a speculative run measures one -p, -n and -t, without -o");
    return run_bench_rows(o, prompts, gens, threads);
  }
  o.n_prompt = prompts[0], o.n_gen = gens[0], o.threads = threads[0];
  if (o.draft.on()) return run_speculative_bench(o);
  if (!o.prompt_file.empty()) fail("-f gives the prompt of a speculative run (--model-draft, --lookup)");
  if (o.n_prompt + o.n_gen == 0) fail("nothing to measure: -p and -n are both 0");
  EngineOptions engine_opts = engine_options(o.ffn, o.model, o.mmap, o.threads);
  engine_opts.require_tokenizer = false;
  Engine engine(std::move(engine_opts), print_note);
  const double load_s = engine.load_seconds();
  const int64_t n_ctx = o.n_prompt + o.n_gen + 1;
  Session& session = engine.start(n_ctx);
  const Model* model = &engine.model();
  const PlannedRun& planned = engine.planned();
  const StorageProfile& storage = engine.storage();
  Backend* backend = &engine.backend();
  // The timeline of the CPU's runs (a device's work is not on the host's clock).
  const bool cpu_alone = backend->device() == Device::Host && planned.session.vram_neurons.empty();
  if (!o.timeline_html.empty() && !cpu_alone)
    fail("--timeline records runs the CPU computes alone; run without a GPU");
  if (!o.timeline_html.empty() && o.n_gen == 0) fail("--timeline records decode: -n must be > 0");
  announce_plan(planned, o.ffn);
  Timeline timeline;
  const BenchResult r = measure(session, o, model->config, cpu_alone ? &timeline : nullptr);
  // Reads at the disk's measured rate, 64 in flight (the io_uring queue's depth).
  const DiskSeconds disk = [&storage](uint64_t bytes, uint64_t requests) {
    return static_cast<double>(requests) * storage.read_seconds(bytes / requests, 64);
  };
  const TimelineSummary summary =
      summarize_timeline(timeline, storage.points.empty() ? DiskSeconds{} : disk);
  if (!o.timeline_html.empty())
    write_text_file(o.timeline_html,
                    timeline_html(timeline, summary, fmt::format("strata bench: {}", o.model)));
  // The limit is the memory the weights are read from: the GPU's when it computes (the
  // emulated GPU's memory is the host's).
  const bool gpu = planned.device.kind == DeviceKind::Cuda && !planned.device.emulated;
  BandwidthProbe probe;
  if (gpu && !o.skip_bandwidth) {
    probe.bytes_per_s = probe.memory_bytes_per_s =
        accelerator_of(planned.device)->read_bandwidth(*backend);
    probe.note = probe.memory_note = "a read kernel over GPU memory";
  } else if (!o.skip_bandwidth) {
    // The probe stays inside --ram-budget: it reads the model's own matrices, or a buffer only
    // where the budget leaves room beside what the run holds.
    const Budgets& b = planned.plan.budgets;
    const uint64_t held = planned.plan.predicted.ram_bytes;
    const uint64_t ram_left = b.ram == 0 ? UINT64_MAX : (b.ram > held ? b.ram - held : 0);
    probe = probe_bandwidth(*backend, engine.pool(), *model, ram_left);
  }
  BenchFigures f = figures(r, *model, planned.session.ffn, probe);
  // The plan's prediction at the RAM rate this run measured (a plan assumes one without
  // measuring): the memory's streaming rate, else the decode kernels' (which a small model's
  // matrices reach from the caches); a device's plan stays as planned.
  PlanPrediction predicted = planned.plan.predicted;
  const double ram_rate = f.memory > 0 ? f.memory : f.bandwidth;
  if (cpu_alone && ram_rate > 0)
    predicted.seconds_per_token =
        seconds_at_ram_rate(predicted, planned.plan.costs.ram_bytes_per_s, ram_rate);
  if (cpu_alone && o.n_prompt > 0 && !o.skip_bandwidth) {
    const ComputePeaks peaks = measure_compute_peaks(engine.pool(), best_kernels());
    f.prompt_macs = prompt_macs_per_token(model->config, o.n_prompt);
    f.compute = prompt_compute_rate(peaks, ffn_weight_type(model->weights));
    f.amx_macs_per_s = peaks.amx_int8.macs_per_s;
    f.amx_f16_macs_per_s = peaks.amx_f16.macs_per_s;
    f.compute_limit = f.compute.macs_per_s / f.prompt_macs;
  }
  if (o.json)
    fmt::print("{}\n", bench_json(o, r, f, *model, session, planned, predicted, load_s,
                                  cpu_alone && o.n_gen > 0 ? &summary : nullptr)
                           .dump(2));
  else
    print_bench(o, r, f, *model, session, planned.session.ffn, predicted);
  if (!o.json && cpu_alone && o.n_gen > 0 && (model->weights.bundled || !o.timeline_html.empty()))
    fmt::print("{}", timeline_table(summary));
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt and decode speed");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_flag("--mmap", o->mmap,
                "Use the model file in place (memory map) instead of reading it into huge-page "
                "memory: faster start, slower decode");
  cmd->add_option("-m,--model", o->model, "GGUF model file");
  cmd->add_option("-p,--n-prompt", o->prompts,
                  "Prompt tokens; a list (16,32,64) measures each, as llama-bench does");
  cmd->add_option("-n,--n-gen", o->gens, "Generated tokens; a list measures each");
  cmd->add_option("-r,--repetitions", o->reps, "Repeats (the median is reported)")
      ->check(in_range(1, 1000));
  cmd->add_option("-t,--threads", o->thread_list, "Threads; a list measures each");
  cmd->add_option("-o,--output", o->format,
                  "llama-bench's rows in this format: md, csv, json, jsonl (lists imply md)");
  cmd->add_flag("--json", o->json, "Print the single-run report as JSON");
  cmd->add_flag("--no-bandwidth", o->skip_bandwidth,
                "Skip the memory bandwidth and compute rate measurements");
  cmd->add_option("--timeline", o->timeline_html,
                  "Draw where the last repetition's decode time went, token by token (HTML page "
                  "with an SVG: each layer's parts and the flash reads in flight)");
  cmd->add_option("-f,--file", o->prompt_file,
                  "With --model-draft or --lookup: a file whose text is the prompt (drafts depend "
                  "on the text)");
  add_ffn_flags(cmd, o->ffn);
  add_gpu_flags(cmd, o->ffn);
  add_draft_flags(cmd, o->draft);
  return {cmd, [o] { return run_bench(*o); }};
}

}  // namespace strata
