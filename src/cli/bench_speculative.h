// strata bench with a draft (--model-draft, --lookup): greedy decoding with and without
// speculation, alternating in each repetition from the same prompt, so the ratio compares runs
// side by side; each run's text is checked against the plain run's. Both models read the prompt
// before the decode timer starts (llama-speculative's decode figure).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli/draft_flags.h"
#include "runtime/session.h"

namespace strata {

struct SpeculativeBench {
  std::vector<double> plain, speculative;  // decode tok/s per repetition
  SpeculationStats stats;                  // the speculative runs', summed
  // The first token where a speculative run's text left the plain run's (-1: none did; greedy
  // ties broken differently by a batch's rounding can do it).
  int64_t first_difference = -1;
  double plain_median() const;
  double speculative_median() const;
};

SpeculativeBench measure_speculative(Session& session, const Speculation& speculation,
                                     const SpeculationParams& params,
                                     std::span<const int32_t> prompt, int n_gen, int reps);

nlohmann::json speculative_bench_json(const SpeculativeBench& b, const Speculation& speculation,
                                      int n_prompt, int n_gen);
// Two lines: the speeds and ratio, then the drafts (speculation_line).
std::string speculative_bench_text(const SpeculativeBench& b, const Speculation& speculation,
                                   int n_prompt, int n_gen);

}  // namespace strata
