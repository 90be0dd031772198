// strata perplexity: llama.cpp-style perplexity of a text file.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "generation/perplexity.h"

namespace strata {

Command add_perplexity_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file (llama.cpp's method)");
  struct Options {
    bool mmap = false;
    std::string model = default_model_path(), file;
    int64_t ctx = 0, chunks = 0;
    int threads = default_threads();
    bool json = false;
    FfnFlags ffn;
  };
  auto o = std::make_shared<Options>();
  cmd->add_flag("--mmap", o->mmap, "Use the model file in place instead of reading it");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)");
  cmd->add_option("-f,--file", o->file, "Text file")->required();
  cmd->add_option("-c,--ctx-size", o->ctx, "Window size in tokens (default: min(512, model's))")
      ->check(in_range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--chunks", o->chunks, "Windows to evaluate (default: all)")
      ->check(in_range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print JSON");
  add_ffn_flags(cmd, o->ffn);
  add_gpu_flags(cmd, o->ffn);
  return {
      cmd, [o] {
        const std::string text = read_regular_file(o->file, kMaxTextFileBytes, "text");
        EngineOptions engine_opts = engine_options(o->ffn, o->model, o->mmap, o->threads);
        Engine engine(std::move(engine_opts), print_note);
        const Model* model = &engine.model();
        const Tokenizer& tok = *model->tokenizer;
        const int64_t n_ctx =
            o->ctx > 0 ? o->ctx : std::min<int64_t>(512, model->config.n_ctx_train);
        const bool add_bos = tok.add_bos_default();
        const auto tokens = tok.encode(text, add_bos);
        if (static_cast<int64_t>(tokens.size()) < n_ctx)
          fail("the text has {} tokens, fewer than one window of {} (lower -c)", tokens.size(),
               n_ctx);
        engine.request().logits_rows = n_ctx;  // every token's logits
        Session& session = engine.start(n_ctx);
        announce_plan(engine.planned(), o->ffn);
        ProgressBar bar("perplexity");
        Timer timer;
        const auto r =
            measure_perplexity(session, tokens, add_bos ? tok.bos() : -1, o->chunks,
                               [&](int64_t d, int64_t t) { bar.update(d, t, "windows"); });
        bar.finish();
        const double seconds = timer.seconds();
        std::vector<double> sparsity;
        for (uint64_t z : session.ffn_zeros())
          sparsity.push_back(static_cast<double>(z) /
                             static_cast<double>(session.ffn_activations_per_layer()));
        if (o->json) {
          nlohmann::json j = {{"model", o->model},
                              {"file", o->file},
                              {"n_ctx", n_ctx},
                              {"tokens", tokens.size()},
                              {"windows", r.windows},
                              {"predictions", r.predictions},
                              {"perplexity", r.perplexity},
                              {"mean_nll", r.mean_nll},
                              {"running", r.running},
                              {"seconds", seconds},
                              {"ffn_sparsity_per_layer", sparsity},
                              {"ffn", ffn_report_json(*model, session)}};
          fmt::print("{}\n", j.dump(2));
        } else {
          fmt::print("perplexity: {:.4f} over {} windows of {} tokens ({} predictions, {:.1f} s)\n",
                     r.perplexity, r.windows, n_ctx, r.predictions, seconds);
          fmt::print("FFN activation sparsity per layer (exact zeros): {:.3f}\n",
                     fmt::join(sparsity, " "));
          if (session.options().ffn != FfnMode::Dense ||
              session.options().sparsity.mode != SparsityMode::Off)
            print_ffn_report(*model, session, stdout);
        }
        return 0;
      }};
}

}  // namespace strata
