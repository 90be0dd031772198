// The --ffn / --check-predictor flags shared by run, bench and perplexity, and the per-run FFN
// report (density per layer, predictor recall, time split) they print.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"
#include "runtime/session.h"

namespace strata {

struct FfnFlags {
  std::string mode = "auto";  // auto: predict when the model has predictors, else dense
  bool check_predictor = false;
};

void add_ffn_flags(CLI::App* cmd, FfnFlags& flags);

// Resolves "auto" and prepares the model for the chosen mode (ffn_down_t built at load time
// when the file lacks it, with a notice on stderr).
SessionOptions resolve_ffn_flags(const FfnFlags& flags, Model& model);

// Weight bytes one decode step reads in this session's mode, from its measured densities:
// attention, output and embedding row, the predictors, and per layer the gate/up/down rows of
// the neurons computed (the whole FFN in dense mode, the dense gate in gate-first mode).
// `stats` are counts over `tokens` tokens.
uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens);

// Per-layer counts of `after` minus `before` (to isolate the decode part of a run).
std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before);

nlohmann::json ffn_report_json(const Model& model, const Session& session);
void print_ffn_report(const Model& model, const Session& session, std::FILE* out);

}  // namespace strata
