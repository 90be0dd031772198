// strata plan: where every part of a model would live under the given budgets, on this machine
// or one described by flags: per layer the dense blocks' device and its neurons per tier, the
// bytes each tier is read per token and the predicted tok/s; saved as JSON for --plan, drawn as
// HTML. Planning needs no device: --vram-budget plans for a GPU this machine may not have.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "placement/cost_model.h"
#include "planning/bandwidth.h"
#include "runtime/run_context.h"

namespace strata {

Command add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Place a model's weights across VRAM, RAM and flash");
  struct Options {
    std::string model = default_model_path();
    int64_t n_ctx = 0;  // run_context: as run sizes it
    std::string out, html;
    bool json = false;
    int threads = default_threads();
    FfnFlags ffn;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF model file");
  cmd->add_option("-c,--ctx-size", o->n_ctx,
                  "Context the KV cache is planned for (default: as run takes it, the model's, at "
                  "most 4096)")
      ->check(in_range<int64_t>(0, int64_t{1} << 24));
  cmd->add_option("-o,--output", o->out, "Write the plan as JSON (for --plan)")->check(kNotEmpty);
  cmd->add_option("--html", o->html, "Write a picture of the plan (HTML/SVG)")->check(kNotEmpty);
  cmd->add_flag("--json", o->json, "Print the plan as JSON");
  cmd->add_option("-t,--threads", o->threads, "Threads for the bandwidth probe")
      ->check(in_range(1, 1024));
  add_ffn_flags(cmd, o->ffn);
  cmd->add_option("--vram-budget", o->ffn.vram_budget,
                  "GPU memory to plan for (e.g. 24G); no GPU is needed to plan")
      ->check(kNotEmpty);
  return {cmd, [o] {
            for (const std::string& path : {o->out, o->html})
              if (!path.empty()) refuse_special_output(path);
            EngineOptions engine_opts = engine_options(o->ffn, o->model, /*mmap=*/true, o->threads);
            engine_opts.require_tokenizer = false;
            engine_opts.run.allow_vram = true;  // hybrid plans for a GPU this machine may lack
            Engine engine(std::move(engine_opts), print_note);
            if (o->ffn.ram_bandwidth <= 0) {
              ThreadPool pool(engine.options().threads);
              // A scratch buffer, not the model: the file is mapped, and reading it whole
              // would measure the disk.
              const double measured = measure_read_bandwidth(pool, kMinProbeBytes);
              if (measured > 0) {
                engine.request().costs.ram_bytes_per_s = measured;
                fmt::print(stderr, "RAM bandwidth measured: {:.1f} GB/s\n", measured / 1e9);
              } else {  // no memory for the probe's buffer now: the plan's assumed rate
                fmt::print(stderr, "RAM bandwidth not measured (no memory for the probe); {:.0f} "
                                   "GB/s assumed (--ram-bandwidth sets it)\n",
                           engine.request().costs.ram_bytes_per_s / 1e9);
              }
            }
            Timer solve;
            const PlannedRun& run =
                engine.plan_only(run_context(o->n_ctx, engine.model().config.n_ctx_train));
            const double solve_s = solve.seconds();
            const nlohmann::json j = plan_to_json(run.plan);
            if (!o->out.empty()) write_text_file(o->out, j.dump(1) + "\n");
            if (!o->html.empty())
              write_text_file(o->html, plan_report_html(run.plan, run.inventory, o->model));
            if (o->json) {
              nlohmann::json shown = j;
              if (run.inventory.expert_neurons > 0) {  // a mixture: residency by expert
                nlohmann::json experts = nlohmann::json::array();
                for (size_t l = 0; l < run.plan.layers.size(); ++l) {
                  const LayerPlan& lp = run.plan.layers[l];
                  const int64_t n = run.inventory.layers[l].n_neurons;
                  experts.push_back(
                      {{"pinned", neurons_per_expert(lp.pinned, run.inventory.expert_neurons, n)},
                       {"vram", neurons_per_expert(lp.vram, run.inventory.expert_neurons, n)}});
                }
                shown["expert_residency"] = {{"neurons_per_expert", run.inventory.expert_neurons},
                                             {"layers", experts}};
              }
              fmt::print("{}\n", shown.dump(1));
              return 0;
            }
            fmt::print("{}\n", plan_summary(run.plan, run.inventory));
            print_plan_layers(run.plan, run.inventory, stdout);
            fmt::print("solved in {:.3f} s\n", solve_s);
            return 0;
          }};
}

}  // namespace strata
