#include "cli/token_source.h"

#include <fmt/format.h>

#include <random>

#include "cli/flag_checks.h"
#include "core/error.h"
#include "offline/text_windows.h"

namespace strata {

void TokenSource::add_flags(CLI::App* cmd, int64_t min_random, const std::string& random_note) {
  auto* text = cmd->add_option("-f,--file", file, "Text file to read");
  auto* random = cmd->add_option(
      "--random-tokens", random_tokens,
      "Instead of a text: this many uniformly random token ids (models without a tokenizer, "
      "such as strata synth's" + random_note + ")");
  random->check(in_range(min_random, int64_t{1} << 30));
  text->excludes(random);
  cmd->add_option("--seed", seed, "Seed of --random-tokens")->check(fits<uint64_t>());
}

std::unique_ptr<Model> TokenSource::load_model(const std::string& path,
                                               const std::string& command) const {
  if (file.empty() && random_tokens == 0)
    fail("strata {} needs a text (-f FILE) or --random-tokens N", command);
  return Model::load(path, /*require_tokenizer=*/random_tokens == 0);
}

std::vector<int32_t> TokenSource::tokens(const Model& model) const {
  if (random_tokens == 0) return tokenize_text_file(model, file);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model.config.n_vocab - 1));
  std::vector<int32_t> out;
  for (int64_t i = 0; i < random_tokens; ++i) out.push_back(id(rng));
  return out;
}

std::string TokenSource::describe() const {
  return random_tokens > 0 ? fmt::format("{} random tokens (seed {})", random_tokens, seed) : file;
}

}  // namespace strata
