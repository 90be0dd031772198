// A draft model for speculative decoding, beside its target's engine: loaded, its vocabulary
// checked against the target's (generation/drafter.h), planned inside the target's budgets for
// the same context and sequences, and started; the target then plans inside what the draft
// leaves (planning/shared_budgets.h). The target's engine is loaded, not started.
#pragma once

#include <memory>

#include "engine/engine.h"

namespace strata {

std::unique_ptr<Engine> start_draft_engine(EngineOptions draft, Engine& target, int64_t n_ctx,
                                           const Engine::Notes& notes);

}  // namespace strata
