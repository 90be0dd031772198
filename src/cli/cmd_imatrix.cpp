// strata imatrix: an importance matrix of a model over a text (offline/imatrix.h), written as
// llama-imatrix writes it (GGUF, or its legacy format with --output-format dat), for
// `strata quantize --imatrix` and llama-quantize alike.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "cli/token_source.h"
#include "core/error.h"
#include "offline/imatrix.h"

namespace strata {

Command add_imatrix_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "imatrix", "Importance matrix of a model over a text, as llama-imatrix (for quantize)");
  struct Options {
    std::string model = default_model_path(), out = "imatrix.gguf", format = "gguf";
    TokenSource source;
    int64_t ctx = 512, chunks = 0;
    int threads = default_threads();
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)");
  o->source.add_flags(cmd, 1, "");
  cmd->add_option("-o,--output", o->out, "Importance matrix to write (default: imatrix.gguf)");
  cmd->add_option("--output-format", o->format, "gguf (default) or dat (llama-imatrix's legacy)")
      ->check(CLI::IsMember({"gguf", "dat"}));
  cmd->add_option("-c,--ctx-size", o->ctx, "Window size in tokens (default: 512)")
      ->check(in_range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--chunks", o->chunks, "Windows to read at most (default: the whole text)")
      ->check(in_range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  return {cmd, [o] {
            const auto model = o->source.load_model(o->model, "imatrix");
            const std::vector<int32_t> tokens = o->source.tokens(*model);
            ImatrixOptions io;
            io.n_ctx = std::min<int64_t>(o->ctx, model->config.n_ctx_train);
            io.max_tokens = o->chunks * io.n_ctx;
            io.dataset = o->source.describe();
            ThreadPool pool(checked_threads(o->threads));
            ProgressBar bar("imatrix");
            const Imatrix m = collect_imatrix(*model, tokens, io, pool, [&](int64_t d, int64_t t) {
              bar.update(d, t, "tokens");
            });
            bar.finish();
            if (o->format == "dat")
              write_imatrix_legacy(o->out, m);
            else
              write_imatrix(o->out, m);
            if (o->json) {
              fmt::print("{}\n", nlohmann::json{{"model", o->model},
                                                {"text", io.dataset},
                                                {"output", o->out},
                                                {"format", o->format},
                                                {"matrices", m.entries.size()},
                                                {"chunks", m.chunk_count},
                                                {"chunk_size", m.chunk_size}}
                                     .dump(2));
              return 0;
            }
            fmt::print("wrote {} ({}): {} matrices over {} windows of {} tokens of {}\n", o->out,
                       o->format, m.entries.size(), m.chunk_count, m.chunk_size, io.dataset);
            return 0;
          }};
}

}  // namespace strata
