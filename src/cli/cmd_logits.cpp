// strata logits: run token ids through the model and print every position's logits as JSON
// (what tools/reference compares against the PyTorch implementation).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "runtime/session.h"

namespace strata {

Command add_logits_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Print the logits for a list of token ids (JSON)");
  struct Options {
    bool mmap = false;
    std::string model;
    std::vector<int32_t> tokens;
    int threads = default_threads();
    FfnFlags ffn;
  };
  auto o = std::make_shared<Options>();
  cmd->add_flag("--mmap", o->mmap,
                "Use the model file in place (memory map) instead of reading it into huge-page "
                "memory: faster start, slower decode");
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required();
  cmd->add_option("--tokens", o->tokens, "Token ids, comma separated")
      ->required()
      ->delimiter(',')
      ->check(in_range<int32_t>(0, std::numeric_limits<int32_t>::max()));
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  add_ffn_flags(cmd, o->ffn);
  add_gpu_flags(cmd, o->ffn);
  return {cmd, [o] {
            const auto n_tokens = static_cast<int64_t>(o->tokens.size());
            EngineOptions engine_opts = engine_options(o->ffn, o->model, o->mmap, o->threads);
            engine_opts.require_tokenizer = false;
            engine_opts.run.logits_rows = n_tokens;  // every token's logits
            Engine engine(std::move(engine_opts), print_note);
            Session& session = engine.start(n_tokens);
            nlohmann::json out = nlohmann::json::array();
            const auto all = session.eval(o->tokens, /*all_logits=*/true);
            const size_t n_vocab = all.size() / o->tokens.size();
            for (size_t i = 0; i < o->tokens.size(); ++i)
              out.push_back(
                  std::vector<float>(all.begin() + i * n_vocab, all.begin() + (i + 1) * n_vocab));
            fmt::print("{}\n", out.dump());
            if (o->ffn.verbose) announce_plan(engine.planned(), o->ffn);
            return 0;
          }};
}

}  // namespace strata
