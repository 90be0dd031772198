// The flags shared by the commands that run a model (run, bench, perplexity, logits, chat,
// batched, serve, plan: FFN mode, budgets, files, flash reads, devices), turned once into the
// engine's options (engine/engine.h), and the plan and per-run FFN report they print.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "runtime/bytes_per_token.h"
#include "runtime/ffn_report.h"
#include "runtime/session.h"

namespace strata {

// The flags: those whose text needs parsing (sizes, names, bandwidths in GB/s) as written, the
// rest bound straight into the request they set (`run`: planning's RunRequest, whose
// sub-structs reach the session whole).
struct FfnFlags {
  std::string mode = "auto";  // auto: predict when the model has predictors, else dense
  std::string ram_budget;  // bytes, with an optional K/M/G suffix (powers of 1024); empty: none
  std::string storage_profile;  // flash tier: strata probe-storage output
  bool lookahead = false;       // flash tier: look-ahead reads (asked for; on by default)
  bool no_lookahead = false;    // flash tier: no look-ahead reads
  std::string profile;          // strata profile output: activation frequencies for the solver
  std::string plan;             // strata plan -o output, used instead of solving
  std::string solver = "auto";  // auto, greedy, ilp
  std::string vram_budget;      // GPU memory: a run's device budget, or what strata plan plans for
  double ram_bandwidth = 0, vram_bandwidth = 0, link_bandwidth = 0;  // GB/s; 0: defaults
  bool verbose = false;                                              // the plan layer by layer
  // KV cache element types; empty: f32 on the CPU, f16 on a GPU.
  std::string cache_type_k, cache_type_v;
  // Training-free activation sparsity: teal, cats or off (the level goes to run.sparsity).
  std::string sparsity_mode = "off";
  // LoRA adapters (llama.cpp's --lora FILE[,FILE] and --lora-scaled FILE:SCALE[,...]).
  std::vector<std::string> lora, lora_scaled;
  RunRequest run;
};

// "16G", "1500M", "123456": bytes. Fails on anything else.
uint64_t parse_bytes(const std::string& text, const char* flag);
// --cache-type-k / -v: F32, F16, Q8_0 or Q4_0 (llama.cpp's). Fails on anything else.
DType kv_type(const std::string& name, const char* flag);

void add_ffn_flags(CLI::App* cmd, FfnFlags& flags);
// -ngl/--n-gpu-layers, --vram-budget and --device, for the commands that run a model.
void add_gpu_flags(CLI::App* cmd, FfnFlags& flags);
// The KV cache's element types as flagged (empty: the CPU's f32).
DType kv_type_or_f32(const std::string& name, const char* flag);

// The flags as the engine's options, parsed once: sizes, KV types, modes and their conflicts
// fail here with one line, before any model is read. `threads` is checked (a warning past the
// machine's hardware threads).
EngineOptions engine_options(const FfnFlags& flags, const std::string& model, bool mmap,
                             int threads);
// The engine's notes, one line each on stderr.
void print_note(const std::string& note);
// announce_plan prints the plan in one line (layer by layer with --verbose) once the session
// exists, so a run that fails before prints only its error.
void announce_plan(const PlannedRun& run, const FfnFlags& flags);
void print_plan_layers(const PlacementPlan& plan, const Inventory& inventory, std::FILE* out);

void print_ffn_report(const Model& model, const Session& session, std::FILE* out);
// One line of a split FFN's report (ffn_report_json's "split"): where activations were
// computed, bytes per tier and over the link, each side's time and waits.
std::string split_report_line(const nlohmann::json& split);
// One line of input sparsity (ffn_report_json's "input_sparsity"): values kept per input.
std::string input_sparsity_line(const nlohmann::json& sparsity);

}  // namespace strata
