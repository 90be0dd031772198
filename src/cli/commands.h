// Each subcommand registers its options on the CLI11 app and returns the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace strata {

struct Command {
  CLI::App* app;
  std::function<int()> action;
};

Command add_run_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_synth_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_logits_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_perplexity_command(CLI::App& app);
Command add_profile_command(CLI::App& app);
Command add_imatrix_command(CLI::App& app);
Command add_train_predictors_command(CLI::App& app);
Command add_bundle_command(CLI::App& app);
Command add_probe_storage_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_quantize_command(CLI::App& app);
Command add_batched_command(CLI::App& app);
Command add_chat_template_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_sparsify_command(CLI::App& app);
Command add_pull_command(CLI::App& app);

// Threads to use by default: every hardware thread.
int default_threads();
// `requested` threads, with a one-line warning on stderr when that is more than the machine's
// hardware threads (each extra thread then waits for a core: slower, never faster).
int checked_threads(int requested);
// The model `run` uses without -m: the one shipped in the repository.
std::string default_model_path();

}  // namespace strata
