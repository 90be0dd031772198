// The --ffn / --check-predictor flags shared by run, bench and perplexity, and the per-run FFN
// report (density per layer, predictor recall, time split) they print.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model.h"
#include "runtime/session.h"
#include "tiers/storage_profile.h"

namespace strata {

struct FfnFlags {
  std::string mode = "auto";  // auto: predict when the model has predictors, else dense
  bool check_predictor = false;
  std::string ram_budget;  // bytes, with an optional K/M/G suffix (powers of 1024); empty: none
  int window = 5;          // flash tier: tokens a neuron stays cached after its last use
  std::string storage_profile;  // flash tier: strata probe-storage output
  bool lookahead = false;       // flash tier: look-ahead reads during attention
  bool split_reads = false;     // flash tier: deciding row first, the rest if non-zero
  std::string profile;     // bundled models: strata profile output; its hottest neurons are pinned
  double pin_share = 0.5;  // share of each layer's cache pinned with --profile
  bool repack = true;      // interleave Q4_0/Q8_0 matrices multiplied whole (--no-repack: off)
  std::string cache_type_k = "f32", cache_type_v = "f32";  // KV cache element types
};

// "16G", "1500M", "123456": bytes. Fails on anything else.
uint64_t parse_bytes(const std::string& text, const char* flag);

void add_ffn_flags(CLI::App* cmd, FfnFlags& flags);

// Resolves "auto" and prepares the model for the chosen mode (ffn_down_t built at load time
// when the file lacks it, with a notice on stderr).
// With --ram-budget, plans memory: for a bundled model, the neuron cache per layer is what the
// budget leaves after the resident weights, the KV cache for n_ctx and scratch; otherwise the
// whole model must fit. Prints the plan; fails clearly when even the minimum does not fit.
// The storage profile (--storage-profile, or MODEL.storage.json next to a bundled model) is
// kept in `storage` for the session to point at. Q4_0 matrices the mode multiplies whole are
// interleaved for the group kernels (Model::interleave_rows) unless --no-repack.
SessionOptions resolve_ffn_flags(const FfnFlags& flags, Model& model, int64_t n_ctx,
                                 StorageProfile* storage = nullptr);

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
