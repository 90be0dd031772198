// strata: the command-line front end. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

#ifndef STRATA_DEFAULT_MODEL
#define STRATA_DEFAULT_MODEL "models/strata-tiny.gguf"
#endif

namespace strata {

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 4 : static_cast<int>(n);
}

int checked_threads(int requested) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && requested > static_cast<int>(cores))
    std::fprintf(stderr,
                 "warning: -t %d is more than the %u hardware threads of this machine; it will "
                 "be slower than -t %u\n",
                 requested, cores, cores);
  return requested;
}

std::string default_model_path() {
  return STRATA_DEFAULT_MODEL;
}

// llama.cpp's flags of several letters after one dash (-np, -ctk), which CLI11 2.1 cannot
// name: rewritten to their long names before parsing.
std::vector<char*> with_long_names(int argc, char** argv) {
  static const std::pair<std::string_view, const char*> kAliases[] = {{"-np", "--parallel"},
                                                                      {"-ctk", "--cache-type-k"},
                                                                      {"-ctv", "--cache-type-v"},
                                                                      {"-ngl", "--n-gpu-layers"},
                                                                      {"-ub", "--ubatch-size"}};
  std::vector<char*> out(argv, argv + argc);
  for (char*& a : out)
    for (const auto& [alias, name] : kAliases)
      if (alias == a) a = const_cast<char*>(name);
  return out;
}

}  // namespace strata

int main(int argc, char** argv) {
  CLI::App app{"strata: fast LLM inference for machines whose memory is too small or too slow"};
  app.require_subcommand(1);
  // Flag errors on one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + " (see --help)\n";
  });
  app.set_version_flag("--version", "strata 0.1.0");
  const std::vector<strata::Command> commands = {
      strata::add_run_command(app),           strata::add_info_command(app),
      strata::add_bench_command(app),         strata::add_synth_command(app),
      strata::add_tokenize_command(app),      strata::add_logits_command(app),
      strata::add_convert_command(app),       strata::add_perplexity_command(app),
      strata::add_profile_command(app),       strata::add_train_predictors_command(app),
      strata::add_bundle_command(app),        strata::add_probe_storage_command(app),
      strata::add_serve_command(app),         strata::add_plan_command(app),
      strata::add_quantize_command(app),      strata::add_batched_command(app),
      strata::add_chat_template_command(app), strata::add_chat_command(app),
      strata::add_sparsify_command(app),      strata::add_imatrix_command(app)};
  try {
    std::vector<char*> args = strata::with_long_names(argc, argv);
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.action();
    return 1;
  } catch (const strata::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    // The last resort: a failure no layer turned into a strata::Error is still one line.
    std::fflush(stdout);
    std::fprintf(stderr, "error: unexpected failure: %s\n", e.what());
    return 1;
  }
}
