// strata profile: count how often each FFN neuron fires over a text (or, in predict mode, how
// often the predictor selects it: what a predict-mode run reads); write the GGUF sidecar, the
// per-layer summary (text or --json) and an HTML report of the hot-neuron curves.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "cli/token_source.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "offline/profile.h"
#include "offline/text_windows.h"

namespace strata {

Command add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Count how often each FFN neuron fires over a text");
  struct Options {
    std::string model = default_model_path(), out, html, ffn = "auto";
    TokenSource source;
    int64_t max_tokens = 0, ctx = 512;
    int threads = default_threads();
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)");
  o->source.add_flags(cmd, 1, "");
  cmd->add_option("-n,--n-tokens", o->max_tokens, "Tokens to read at most (default: all)")
      ->check(in_range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("-c,--ctx-size", o->ctx, "Window size in tokens")
      ->check(in_range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("-o,--output", o->out, "Profile file to write (GGUF)")->required();
  cmd->add_option("--html", o->html, "HTML report to write (default: OUTPUT with .html)");
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->add_option("--ffn", o->ffn,
                  "What to count: dense (the activations that fire), predict (the predictor's "
                  "selections: what a predict-mode run reads), auto (predict when the model has "
                  "predictors, as runs default to)")
      ->check(CLI::IsMember({"auto", "dense", "predict"}));
  return {
      cmd, [o] {
        const auto model = o->source.load_model(o->model, "profile");
        const std::vector<int32_t> tokens = o->source.tokens(*model);
        const bool predict =
            o->ffn == "predict" || (o->ffn == "auto" && model->weights.has_predictors);
        if (predict && !model->weights.has_predictors)
          fail("--ffn predict: '{}' has no predictors (strata train-predictors makes them)",
               o->model);
        if (predict && model->weights.bundled)
          fail("profile '{}' in predict mode through the file it was bundled from", o->model);
        if (predict) model->ensure_down_t();
        const int64_t n_ctx = std::min<int64_t>(o->ctx, model->config.n_ctx_train);
        ThreadPool pool(checked_threads(o->threads));
        ProgressBar bar("profile");
        Timer timer;
        NeuronProfile p = profile_model(
            *model, tokens, n_ctx, o->max_tokens, pool,
            [&](int64_t d, int64_t t) { bar.update(d, t, "tokens"); },
            predict ? FfnMode::Predict : FfnMode::Dense);
        bar.finish();
        p.text = o->source.describe();
        write_profile(p, o->out);
        std::string html = o->html;
        if (html.empty()) {
          html = o->out;
          const auto dot = html.rfind('.');
          if (dot != std::string::npos && html.find('/', dot) == std::string::npos) html.erase(dot);
          html += ".html";
        }
        write_text_file(html, profile_report_html(
                                  p, model->config.name.empty() ? o->model : model->config.name));
        std::vector<LayerProfileSummary> summaries;
        for (const auto& counts : p.counts) summaries.push_back(summarize_layer(counts, p.tokens));
        if (o->json) {
          nlohmann::json layers = nlohmann::json::array();
          for (size_t l = 0; l < summaries.size(); ++l)
            layers.push_back({{"layer", l},
                              {"sparsity", summaries[l].sparsity},
                              {"neurons_for_50", summaries[l].neurons_for_50},
                              {"neurons_for_80", summaries[l].neurons_for_80},
                              {"neurons_for_95", summaries[l].neurons_for_95},
                              {"window_reuse", p.window_reuse.at(l)}});
          fmt::print("{}\n", nlohmann::json{{"model", o->model},
                                            {"model_hash", p.model_hash},
                                            {"text", p.text},
                                            {"tokens", p.tokens},
                                            {"ffn_mode", p.ffn_mode},
                                            {"profile", o->out},
                                            {"report", html},
                                            {"seconds", timer.seconds()},
                                            {"reuse_window", kReuseWindow},
                                            {"layers", layers}}
                                 .dump(2));
          return 0;
        }
        fmt::print("profiled {} tokens ({}) in {:.1f} s -> {} (report: {})\n", p.tokens,
                   predict ? "the predictor's selections" : "the activations that fire",
                   timer.seconds(), o->out, html);
        fmt::print(
            "layer  sparsity  hottest neurons covering 50% / 80% / 95% of activations  active "
            "in the last {} tokens\n",
            kReuseWindow);
        for (size_t l = 0; l < summaries.size(); ++l)
          fmt::print("{:>5}  {:>8.3f}  {:>6.1f}% / {:>5.1f}% / {:>5.1f}%  {:>40.1f}%\n", l,
                     summaries[l].sparsity, 100 * summaries[l].neurons_for_50,
                     100 * summaries[l].neurons_for_80, 100 * summaries[l].neurons_for_95,
                     100 * p.window_reuse.at(l));
        return 0;
      }};
}

}  // namespace strata
