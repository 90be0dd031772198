#include "cli/hf_model.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "cli/progress.h"
#include "core/error.h"
#include "offline/model_pull.h"

namespace strata {

void add_hf_flag(CLI::App* cmd, HfFlag& flag, CLI::Option* model_option) {
  flag.model_option = model_option;
  cmd->add_option("--hf-repo", flag.repo,
                  "Hugging Face model user/repo[:quant] (llama.cpp's -hf): pulled into the cache, then used");
}

void use_hf_model(const HfFlag& flag, std::string& model) {
  if (flag.repo.empty()) return;
  if (flag.model_option != nullptr && flag.model_option->count() > 0)
    fail("give the model with -m FILE or -hf user/repo[:quant], not both");
  model = pull_with_progress(flag.repo);
}

std::string pull_with_progress(const std::string& spec, const std::string& revision) {
  PullOptions options;
  if (const char* endpoint = std::getenv("HF_ENDPOINT"); endpoint != nullptr && *endpoint) options.host = endpoint;
  options.revision = revision;
  ProgressBar bar("pull " + spec);
  options.progress = [&bar](uint64_t done, uint64_t total) { bar.update(done, total); };
  const auto start = std::chrono::steady_clock::now();
  const std::string path = pull_model(parse_pull_spec(spec), options);
  bar.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "model {} at {} ({:.2f} s)\n", spec, path, seconds);
  return path;
}

}  // namespace strata
