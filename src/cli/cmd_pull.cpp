// strata pull user/repo[:quant]: a GGUF model downloaded into the cache (resumed after a cut,
// checked against the host's size and SHA-256); its path printed.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/hf_model.h"

namespace strata {

Command add_pull_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "pull", "Download a GGUF model from Hugging Face ($HF_ENDPOINT) into the cache; print its path");
  auto spec = std::make_shared<std::string>();
  auto revision = std::make_shared<std::string>("main");
  cmd->add_option("model", *spec, "user/repo[:quant], e.g. bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M")
      ->required();
  cmd->add_option("--revision", *revision, "Branch, tag or commit of the repository");
  return {cmd, [spec, revision] {
            fmt::print("{}\n", pull_with_progress(*spec, *revision));
            return 0;
          }};
}

}  // namespace strata
