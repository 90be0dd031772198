// strata: the command-line front end. Each subcommand lives in its own cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_flags.h"
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

// A flag strata does not know, with the nearest it does: "did you mean" for CLI11's errors.
std::string with_suggestion(const CLI::App* app, const CLI::Error& e) {
  std::string message = "error: " + std::string(e.what());
  const auto parsed = app->get_subcommands();
  const CLI::App* sub = parsed.empty() ? app : parsed[0];
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  for (const std::string& arg : sub->remaining()) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string near = closest_flag(arg, names);
    if (!near.empty()) return message + " (did you mean " + near + "? see --help)\n";
  }
  return message + " (see --help)\n";
}

// The command line with llama.cpp's spellings made strata's (llama_flags.h).
std::vector<std::string> strata_arguments(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const CLI::App* sub = nullptr;
  if (!args.empty())
    for (const CLI::App* s : app.get_subcommands({}))
      if (s->check_name(args[0])) sub = s;
  return with_strata_spellings(args, [&](std::string_view name) {
    return sub != nullptr && sub->get_option_no_throw(std::string(name)) != nullptr;
  });
}

}  // namespace strata

int main(int argc, char** argv) {
  CLI::App app{"strata: fast LLM inference for machines whose memory is too small or too slow"};
  app.require_subcommand(1);
  // --help shows each option's default (subcommands take this from the app when made).
  app.option_defaults()->always_capture_default();
  // Flag errors on one line, like every other error.
  app.failure_message(strata::with_suggestion);
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
      strata::add_sparsify_command(app),      strata::add_imatrix_command(app),
      strata::add_pull_command(app)};
  try {
    std::vector<std::string> args = strata::strata_arguments(app, argc, argv);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
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
