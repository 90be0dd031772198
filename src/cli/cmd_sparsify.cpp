// strata sparsify: calibrate training-free activation sparsity (TEAL's per-input thresholds,
// CATS's gate thresholds) over a text for model-wide sparsity levels (offline/sparsify.h), write
// the model with them, report each layer's split and errors (text or --json) and draw them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "cli/token_source.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "offline/sparsify.h"

namespace strata {

namespace {

std::vector<float> parse_levels(const std::string& text) {
  std::vector<float> levels;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string word = text.substr(at, comma - at);
    char* end = nullptr;
    const float v = std::strtof(word.c_str(), &end);
    if (word.empty() || end != word.c_str() + word.size())
      fail("--sparsity: '{}' is not a number (levels such as 0.25,0.4,0.5)", word);
    levels.push_back(v);
    at = comma + 1;
  }
  return levels;
}

nlohmann::json report_json(const SparsifyResult& r) {
  nlohmann::json levels = nlohmann::json::array();
  for (size_t li = 0; li < r.thresholds.levels.size(); ++li) {
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < r.layers[li].size(); ++l) {
      const LayerSparsity& s = r.layers[li][l];
      nlohmann::json inputs = nlohmann::json::object();
      for (MatrixInput k : kAllMatrixInputs) {
        const auto i = static_cast<size_t>(k);
        inputs[matrix_input_name(k)] = {{"sparsity", s.sparsity[i]},
                                        {"density", 1 - s.sparsity[i]},
                                        {"threshold", s.threshold[i]}};
      }
      layers.push_back({{"layer", l},
                        {"inputs", inputs},
                        {"error", s.error},
                        {"cats_threshold", s.cats_threshold},
                        {"cats_error", s.cats_error}});
    }
    levels.push_back({{"sparsity", r.thresholds.levels[li]}, {"layers", layers}});
  }
  return levels;
}

}  // namespace

Command add_sparsify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sparsify", "Calibrate training-free activation sparsity (TEAL, CATS) over a text");
  struct Options {
    std::string model = default_model_path(), out, html, levels = "0.25,0.4,0.5";
    std::string allocation = "greedy";
    TokenSource source;
    int64_t max_tokens = 2048, ctx = 256;
    double step = 0.05;
    int threads = default_threads();
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)");
  o->source.add_flags(cmd, 2, "; thresholds for benchmarks, not for quality");
  cmd->add_option("--sparsity", o->levels,
                  "Model-wide sparsity levels to calibrate, ascending, comma-separated (default "
                  "0.25,0.4,0.5)");
  cmd->add_option("--allocation", o->allocation,
                  "How a layer's level is split across its inputs: greedy (TEAL's block-wise "
                  "greedy on the layer's output error) or uniform")
      ->check(CLI::IsMember({"greedy", "uniform"}));
  cmd->add_option("--step", o->step, "Greedy: an input's sparsity per step (default 0.05)");
  cmd->add_option("-n,--n-tokens", o->max_tokens, "Calibration tokens at most (default 2048)")
      ->check(in_range(int64_t{2}, int64_t{1} << 24));
  cmd->add_option("-c,--ctx-size", o->ctx, "Calibration window in tokens (default 256)")
      ->check(in_range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("-o,--output", o->out, "Model file to write with the thresholds (GGUF)");
  cmd->add_option("--html", o->html, "HTML report to write");
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  return {cmd, [o] {
            SparsifyOptions so;
            so.levels = parse_levels(o->levels);
            so.allocation =
                o->allocation == "uniform" ? SparsityAllocation::Uniform : SparsityAllocation::Greedy;
            so.step = o->step;
            so.max_tokens = o->max_tokens;
            so.n_ctx = o->ctx;
            const auto model = o->source.load_model(o->model, "sparsify");
            const std::vector<int32_t> tokens = o->source.tokens(*model);
            const std::string text = o->source.describe();
            ThreadPool pool(checked_threads(o->threads));
            ProgressBar bar("sparsify");
            Timer timer;
            const SparsifyResult r = calibrate_sparsity(
                *model, tokens, so, pool, [&](int64_t d, int64_t t) { bar.update(d, t, "layers"); });
            bar.finish();
            if (!o->out.empty()) write_model_with_thresholds(*model, r.thresholds, o->out);
            const std::string name = model->config.name.empty() ? o->model : model->config.name;
            if (!o->html.empty()) write_text_file(o->html, sparsity_report_html(r, name));
            if (o->json) {
              fmt::print("{}\n", nlohmann::json{{"model", o->model},
                                                {"text", text},
                                                {"tokens", r.tokens},
                                                {"allocation", o->allocation},
                                                {"trials", r.trials},
                                                {"seconds", timer.seconds()},
                                                {"output", o->out},
                                                {"report", o->html},
                                                {"levels", report_json(r)}}
                                     .dump(2));
              return 0;
            }
            fmt::print("calibrated {} tokens of {} ({} allocation, {} layer replays) in {:.1f} s{}\n",
                       r.tokens, text, o->allocation, r.trials, timer.seconds(),
                       o->out.empty() ? "" : " -> " + o->out);
            for (size_t li = 0; li < r.thresholds.levels.size(); ++li) {
              fmt::print("sparsity {:g}: layer  attn_qkv  attn_output  ffn_gate_up  ffn_down  "
                         "error    CATS error\n",
                         r.thresholds.levels[li]);
              for (size_t l = 0; l < r.layers[li].size(); ++l) {
                const LayerSparsity& s = r.layers[li][l];
                fmt::print("{:>19}  {:>7.1f}%  {:>10.1f}%  {:>10.1f}%  {:>7.1f}%  {:.5f}  {:.5f}\n",
                           l, 100 * s.sparsity[0], 100 * s.sparsity[1], 100 * s.sparsity[2],
                           100 * s.sparsity[3], s.error, s.cats_error);
              }
            }
            return 0;
          }};
}

}  // namespace strata
