// Speculative decoding's flags (llama.cpp's spellings, old and new: -md/--model-draft/
// --spec-draft-model, --draft-max/--spec-draft-n-max, --draft-min/--spec-draft-n-min,
// --draft-p-min, -ngld/--gpu-layers-draft, -td/--threads-draft; and strata's --lookup for
// prompt lookup without a draft model), shared by the commands that generate (run, chat, bench,
// serve), and the drafter they ask for.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"
#include "generation/drafter.h"
#include "generation/speculative.h"

namespace strata {

struct DraftFlags {
  std::string model;              // -md: a draft model's file
  bool lookup = false;            // --lookup: prompt-lookup drafts
  int gpu_layers = 0;             // -ngld: the draft's layers on the GPU
  int threads = 0;                // -td: the draft's threads (0: the target's)
  int layers = 0;                 // --draft-layers: the model's own first N layers draft (0: not)
  SpeculationParams speculation;  // draft_max 0: not given (speculation_params)
  bool on() const { return lookup || !model.empty() || layers > 0; }
};

void add_draft_flags(CLI::App* cmd, DraftFlags& flags);

// The drafter the flags ask for, with its draft model's engine when there is one.
struct Speculation {
  std::unique_ptr<Engine> draft_engine;
  std::unique_ptr<Session> self_session;  // --draft-layers: the model's early exit
  std::unique_ptr<Drafter> drafter;       // null: speculative decoding is off
  SpeculationParams params;               // speculation_params of the flags
  std::string draft_model;                // its file, empty for prompt lookup and --draft-layers
};
// The speculative part of a --json report (null when off): where drafts came from, what was
// kept, and the time drafting and verifying.
nlohmann::json speculation_json(const Speculation& s, const SpeculationStats& stats);
// "draft model 'd.gguf': 30 of 40 drafted tokens kept (75.0%) in 12 steps (3 without a draft);
// drafting 0.21 s, verifying 1.20 s"
std::string speculation_line(const Speculation& s, const SpeculationStats& stats);

// The flags' parameters, --draft-max defaulting by the draft's source: 16 for prompt lookup
// (its drafts cost nothing), 3 for a draft model (llama.cpp v0.5.0's; 2 to 4 measured within 6%
// of each other with a 7B F16 model and its Q4_0 copy: docs/PERFORMANCE.md).
SpeculationParams speculation_params(const DraftFlags& flags);
// Checks the flags (one line naming what is wrong) before any model is read.
void check_draft_flags(const DraftFlags& flags);
// Before target.start(): the draft model, if any, is started inside the target's budgets for
// n_ctx positions (engine/draft_engine.h); `target_threads` unless -td.
Speculation start_speculation(const DraftFlags& flags, Engine& target, int64_t n_ctx);
// After target.start(): --draft-layers' drafter, a second session of the model's (on the CPU,
// its first N layers then its output head) beside the target's.
void finish_speculation(Speculation& s, const DraftFlags& flags, Engine& target);

}  // namespace strata
