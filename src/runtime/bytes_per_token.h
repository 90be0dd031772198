// The weight bytes a session's decode reads per token, from what it measured: the accounting
// behind strata bench's bandwidth figures and run's reports, beside the session whose counts
// it reads.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "runtime/session.h"

namespace strata {

// Weight bytes one decode step reads in this session's mode, from its measured densities:
// attention, output and embedding row, the predictors, and per layer the gate/up/down rows of
// the neurons computed (the whole FFN in dense mode, the dense gate in gate-first mode).
// `stats` are counts over `tokens` tokens.
uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens);

// Weight bytes one decode step reads through input-sparse products (TEAL's column copies): each
// layer matrix's bytes times its input's measured share of non-zero values, the output matrix
// and an embedding row.
uint64_t input_sparse_bytes_per_token(const Model& model, const std::vector<InputDensity>& density);

// Per-layer counts of `after` minus `before` (to isolate the decode part of a run).
std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before);

}  // namespace strata
