// The sampling flags of run, serve and batched (llama.cpp's names): --temp, --top-k, --top-p,
// --min-p, --repeat-penalty, --repeat-last-n. `what` starts each description ("Temperature",
// or "Default temperature" for a server whose requests may set their own).
#pragma once

#include <CLI/CLI.hpp>
#include <cctype>
#include <string>

#include "cli/flag_checks.h"
#include "generation/sampler.h"

namespace strata {

inline void add_sampling_flags(CLI::App* cmd, SamplerParams& s, const std::string& what = "") {
  const auto d = [&](const char* text) {
    std::string out = what.empty() ? std::string(text) : what + " " + text;
    out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
  };
  cmd->add_option("--temp", s.temperature, d("temperature (0: greedy)"))
      ->check(in_range(0.0f, 100.0f));
  cmd->add_option("--top-k", s.top_k, d("top-k (0: off)"))->check(in_range(0, 1 << 30));
  cmd->add_option("--top-p", s.top_p, d("top-p (1: off)"))->check(in_range(0.0f, 1.0f));
  cmd->add_option("--min-p", s.min_p, d("min-p (0: off)"))->check(in_range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, d("repetition penalty (1: off)"))
      ->check(in_range(0.0f, 100.0f));
  cmd->add_option("--repeat-last-n", s.repeat_last_n,
                  d("tokens the penalty looks back over (-1: all)"))
      ->check(in_range(-1, 1 << 30));
}

}  // namespace strata
