// strata bench: prompt and decode throughput as the median of repeats (like llama-bench), with
// the machine's measured read bandwidth and the share of the bandwidth limit reached.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/timer.h"
#include "backends/cpu/kernels.h"
#include "runtime/bandwidth.h"
#include "runtime/session.h"

namespace strata {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Command add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt and decode speed");
  struct Options {
    bool mmap = false;
    std::string model = default_model_path();
    int n_prompt = 64;
    int n_gen = 128;
    int reps = 3;
    int threads = default_threads();
    bool json = false;
    bool skip_bandwidth = false;
    FfnFlags ffn;
  };
  auto o = std::make_shared<Options>();
  cmd->add_flag("--mmap", o->mmap,
                "Use the model file in place (memory map) instead of reading it into huge-page "
                "memory: faster start, slower decode");
  cmd->add_option("-m,--model", o->model, "GGUF model file");
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens")->check(in_range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens")->check(in_range(0, 1 << 20));
  cmd->add_option("-r,--repetitions", o->reps, "Repeats (the median is reported)")
      ->check(in_range(1, 1000));
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--no-bandwidth", o->skip_bandwidth, "Skip the memory bandwidth measurement");
  add_ffn_flags(cmd, o->ffn);
  return {
      cmd, [o] {
        if (o->n_prompt + o->n_gen == 0) fail("nothing to measure: -p and -n are both 0");
        Timer load_timer;
        const auto model = Model::load(o->model, /*require_tokenizer=*/false,
                                       o->mmap ? LoadMode::Map : LoadMode::Read);
        const double load_s = load_timer.seconds();
        const ModelConfig& c = model->config;
        const int64_t n_ctx = o->n_prompt + o->n_gen + 1;
        StorageProfile storage;
        const PlannedRun planned = resolve_ffn_flags(o->ffn, *model, n_ctx, &storage);
        ThreadPool pool(checked_threads(o->threads));
        Session session(*model, n_ctx, pool, planned.session);
        announce_plan(planned, o->ffn);
        // Decode-only FFN statistics and times, summed over the decode repeats.
        std::vector<FfnLayerStats> decode_stats(c.n_layer);
        ForwardTimes decode_times;
        double decode_tokens = 0;
        NeuronCacheStats decode_flash;  // flash tier, decode steps only

        // Deterministic pseudo-random prompt tokens.
        std::vector<int32_t> prompt(o->n_prompt);
        uint64_t s = 12345;
        for (auto& t : prompt) {
          s = s * 6364136223846793005ull + 1442695040888963407ull;
          t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(c.n_vocab));
        }
        session.eval(prompt.empty() ? 1 : prompt[0]);  // warm-up: maps every weight page
        std::vector<double> pp, tg;
        for (int r = 0; r < o->reps; ++r) {
          session.reset();
          int32_t next = 1;
          if (o->n_prompt > 0) {
            Timer t;
            auto logits = session.eval(prompt);
            pp.push_back(o->n_prompt / t.seconds());
            next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                        logits.begin());
          }
          if (o->n_gen > 0) {
            const auto stats_before = session.ffn_stats();
            const ForwardTimes times_before = session.times();
            const NeuronCacheStats flash_before = session.flash_stats();
            Timer t;
            for (int i = 0; i < o->n_gen; ++i) {
              auto logits = session.eval(next);
              next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                          logits.begin());
            }
            tg.push_back(o->n_gen / t.seconds());
            const auto d = stats_difference(session.ffn_stats(), stats_before);
            for (size_t l = 0; l < d.size(); ++l) {
              decode_stats[l].computed += d[l].computed;
              decode_stats[l].nonzero += d[l].nonzero;
            }
            const ForwardTimes& now = session.times();
            decode_times.attention += now.attention - times_before.attention;
            decode_times.predictor += now.predictor - times_before.predictor;
            decode_times.ffn += now.ffn - times_before.ffn;
            decode_times.output += now.output - times_before.output;
            decode_tokens += o->n_gen;
            const NeuronCacheStats flash_now = session.flash_stats();
            decode_flash.hits += flash_now.hits - flash_before.hits;
            decode_flash.misses += flash_now.misses - flash_before.misses;
            decode_flash.bytes_read += flash_now.bytes_read - flash_before.bytes_read;
            decode_flash.reads += flash_now.reads - flash_before.reads;
            decode_flash.read_seconds += flash_now.read_seconds - flash_before.read_seconds;
          }
        }
        const double pp_med = pp.empty() ? 0 : median(pp);
        const double tg_med = tg.empty() ? 0 : median(tg);
        const uint64_t bytes =
            bytes_touched_per_token(*model, planned.session.ffn, decode_stats, decode_tokens);
        double density = 0;  // mean share of FFN neurons computed per decode token
        for (const auto& l : decode_stats)
          density += decode_tokens > 0 ? l.computed / (decode_tokens * c.n_ff) : 0.0;
        density /= static_cast<double>(c.n_layer);
        auto ms_per_token = [&](double s) {
          return decode_tokens > 0 ? 1e3 * s / decode_tokens : 0.0;
        };
        const double bw = o->skip_bandwidth ? 0.0 : measure_read_bandwidth(pool);
        const double limit = bw > 0 ? bw / bytes : 0.0;
        std::string type =
            dtype_name(model->weights.layers.empty() ? model->weights.output.type
                                                     : model->weights.layers[0].ffn_up.type);
        if (o->json) {
          nlohmann::json j = {
              {"model", o->model},
              {"type", type},
              {"threads", o->threads},
              {"kernels", best_kernels().name},
              {"n_prompt", o->n_prompt},
              {"n_gen", o->n_gen},
              {"repetitions", o->reps},
              {"prompt_tokens_per_s", pp_med},
              {"decode_tokens_per_s", tg_med},
              {"prompt_runs", pp},
              {"decode_runs", tg},
              {"weight_bytes_per_token", bytes},
              {"bandwidth_bytes_per_s", bw},
              {"bandwidth_limit_tokens_per_s", limit},
              {"bandwidth_limit_percent", limit > 0 ? 100 * tg_med / limit : 0},
              {"load_s", load_s},
              {"ffn_mode", ffn_mode_name(planned.session.ffn)},
              {"ffn_density", density},
              {"ffn_report", ffn_report_json(*model, session)},
              {"decode_flash",
               {{"bytes_read_per_token", decode_flash.bytes_read / std::max(1.0, decode_tokens)},
                {"reads_per_token", decode_flash.reads / std::max(1.0, decode_tokens)},
                {"cache_hit_rate",
                 decode_flash.hits + decode_flash.misses > 0
                     ? static_cast<double>(decode_flash.hits) /
                           static_cast<double>(decode_flash.hits + decode_flash.misses)
                     : 0.0},
                {"io_wait_s_per_token", decode_flash.read_seconds / std::max(1.0, decode_tokens)}}},
              {"decode_ms_per_token",
               {{"attention", ms_per_token(decode_times.attention)},
                {"predictor", ms_per_token(decode_times.predictor)},
                {"ffn", ms_per_token(decode_times.ffn)},
                {"output", ms_per_token(decode_times.output)}}}};
          fmt::print("{}\n", j.dump(2));
          return 0;
        }
        fmt::print("model: {} ({}, {} layers, {:.3f} GB read per token), {} threads, {} kernels\n",
                   o->model, type, c.n_layer, bytes / 1e9, o->threads, best_kernels().name);
        if (decode_tokens > 0)
          fmt::print(
              "FFN {}: density {:.3f}; decode ms/token: attention {:.2f}, predictor {:.2f}, "
              "FFN {:.2f}, output {:.2f}\n",
              ffn_mode_name(planned.session.ffn), density, ms_per_token(decode_times.attention),
              ms_per_token(decode_times.predictor), ms_per_token(decode_times.ffn),
              ms_per_token(decode_times.output));
        fmt::print("| test   |   tok/s (median of {}) | runs\n", o->reps);
        if (!pp.empty())
          fmt::print("| pp{:<4} | {:>10.2f}            | {:.2f}\n", o->n_prompt, pp_med,
                     fmt::join(pp, ", "));
        if (!tg.empty())
          fmt::print("| tg{:<4} | {:>10.2f}            | {:.2f}\n", o->n_gen, tg_med,
                     fmt::join(tg, ", "));
        if (planned.session.check_predictor) print_ffn_report(*model, session, stdout);
        if (bw > 0)
          fmt::print(
              "memory read bandwidth: {:.1f} GB/s -> decode limit {:.2f} tok/s; "
              "decode reaches {:.1f}% of it\n",
              bw / 1e9, limit, 100 * tg_med / limit);
        return 0;
      }};
}

}  // namespace strata
