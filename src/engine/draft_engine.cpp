#include "engine/draft_engine.h"

#include "core/error.h"
#include "generation/drafter.h"
#include "planning/shared_budgets.h"

namespace strata {

std::unique_ptr<Engine> start_draft_engine(EngineOptions draft, Engine& target, int64_t n_ctx,
                                           const Engine::Notes& notes) {
  const std::string path = draft.model_path;
  draft.run.budgets = target.request().budgets;
  draft.run.n_seq = target.request().n_seq;
  draft.require_tokenizer = true;
  auto engine = std::make_unique<Engine>(
      std::move(draft), [notes](const std::string& note) { notes("draft: " + note); });
  const std::string mismatch =
      draft_vocab_mismatch(*target.model().tokenizer, *engine->model().tokenizer);
  if (!mismatch.empty())
    fail("the draft model '{}' cannot draft for '{}': {}", path, target.options().model_path,
         mismatch);
  engine->start(n_ctx);
  RunRequest& r = target.request();
  r.budgets = budgets_beside(r.budgets, engine->planned().plan.predicted,
                             fmt::format("the draft model '{}'", path));
  return engine;
}

}  // namespace strata
