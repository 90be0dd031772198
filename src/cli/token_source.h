// What an offline command reads the model over: a text file (-f), or, for models without a
// tokenizer (strata synth's), uniformly random token ids (--random-tokens N --seed S). Shared
// by profile and sparsify.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"

namespace strata {

struct TokenSource {
  std::string file;
  int64_t random_tokens = 0;
  uint64_t seed = 1;

  // -f/--file, --random-tokens (at least `min_random`) and --seed on `cmd`; `random_note` says
  // what random tokens are good for there.
  void add_flags(CLI::App* cmd, int64_t min_random, const std::string& random_note);
  // The model as the source needs it (a tokenizer for a text), failing with one line naming
  // `command` when neither was given.
  std::unique_ptr<Model> load_model(const std::string& path, const std::string& command) const;
  std::vector<int32_t> tokens(const Model& model) const;
  std::string describe() const;  // the file, or "N random tokens (seed S)"
};

}  // namespace strata
