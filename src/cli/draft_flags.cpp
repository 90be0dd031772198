#include "cli/draft_flags.h"

#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "engine/draft_engine.h"

namespace strata {

void add_draft_flags(CLI::App* cmd, DraftFlags& flags) {
  cmd->add_option("--model-draft,--spec-draft-model", flags.model,
                  "Speculative decoding with this draft model (-md, llama.cpp's name): a smaller "
                  "model with the same vocabulary drafts, the model checks several tokens a "
                  "pass; the same text")
      ->check(kNotEmpty);
  cmd->add_flag("--lookup", flags.lookup,
                "Speculative decoding with drafts looked up in the prompt and output (n-grams): "
                "the same text, fewer passes over the weights when the output repeats its input");
  flags.speculation.draft_max = 0;  // not given: speculation_params's default
  cmd->add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", flags.speculation.draft_max,
                  "Tokens drafted a step (default: 3 with a draft model, 16 with --lookup)")
      ->check(in_range(1, 256));
  cmd->add_option("--draft-min,--draft-n-min,--spec-draft-n-min", flags.speculation.draft_min,
                  "Fewer drafted tokens than this: a plain step")
      ->check(in_range(1, 256));
  cmd->add_option("--draft-p-min,--spec-draft-p-min", flags.speculation.p_min,
                  "A draft model drafts while its most likely token is at least this likely "
                  "(default 0)")
      ->check(in_range(0.0f, 1.0f));
  cmd->add_option("--gpu-layers-draft,--n-gpu-layers-draft,--spec-draft-ngl", flags.gpu_layers,
                  "The draft model's layers on the GPU (-ngld, llama.cpp's name)")
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--draft-layers", flags.layers,
                  "Speculative decoding drafting with the model's own first N layers and its "
                  "output head (an early exit: no second model)")
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--threads-draft,--spec-draft-threads", flags.threads,
                  "The draft model's threads (-td; default: the model's)")
      ->check(in_range(0, 1024));
}

SpeculationParams speculation_params(const DraftFlags& flags) {
  SpeculationParams p = flags.speculation;
  if (p.draft_max == 0) p.draft_max = flags.lookup ? 16 : 3;
  return p;
}

void check_draft_flags(const DraftFlags& flags) {
  if (flags.lookup + !flags.model.empty() + (flags.layers > 0) > 1)
    fail("--lookup, --model-draft and --draft-layers are three sources of drafts: give one");
  check_speculation(speculation_params(flags));
}

Speculation start_speculation(const DraftFlags& flags, Engine& target, int64_t n_ctx) {
  check_draft_flags(flags);
  Speculation s;
  s.params = speculation_params(flags);
  if (flags.lookup) {
    s.drafter =
        std::make_unique<LookupDrafter>(flags.speculation.ngram_min, flags.speculation.ngram_max);
  }
  if (flags.model.empty()) return s;
  const EngineOptions& t = target.options();
  FfnFlags draft_flags;
  draft_flags.run.device.gpu_layers = flags.gpu_layers;
  EngineOptions draft = engine_options(draft_flags, flags.model, t.load == LoadMode::Map,
                                       flags.threads > 0 ? flags.threads : t.threads);
  s.draft_engine = start_draft_engine(std::move(draft), target, n_ctx, print_note);
  s.drafter = std::make_unique<ModelDrafter>(s.draft_engine->session(),
                                             target.model().tokenizer->n_vocab(), s.params.p_min);
  s.draft_model = flags.model;
  return s;
}

void finish_speculation(Speculation& s, const DraftFlags& flags, Engine& target) {
  if (flags.layers == 0) return;
  const Model& m = target.model();
  if (flags.layers >= m.config.n_layer)
    fail("--draft-layers {}: the model has {} layers, and a draft takes fewer", flags.layers,
         m.config.n_layer);
  const Session& t = target.session();
  if (t.backend().device() != Device::Host || m.weights.bundled)
    fail(
        "--draft-layers drafts on the CPU beside a model in RAM; this run's model is on a "
        "device or on flash (use --model-draft or --lookup)");
  SessionOptions o = t.options();
  o.exit_layer = flags.layers;
  s.self_session = std::make_unique<Session>(m, t.n_ctx(), target.backend(), o);
  s.drafter =
      std::make_unique<ModelDrafter>(*s.self_session, m.tokenizer->n_vocab(), s.params.p_min);
}

nlohmann::json speculation_json(const Speculation& s, const SpeculationStats& stats) {
  if (!s.drafter) return nullptr;
  return {{"draft", s.drafter->kind()},
          {"draft_model", s.draft_model.empty() ? nlohmann::json() : nlohmann::json(s.draft_model)},
          {"draft_layers", s.self_session ? nlohmann::json(s.self_session->options().exit_layer)
                                          : nlohmann::json()},
          {"steps", stats.steps},
          {"drafted", stats.drafted},
          {"accepted", stats.accepted},
          {"acceptance", stats.acceptance()},
          {"plain_steps", stats.plain},
          {"draft_passes", s.drafter->passes()},
          {"draft_s", stats.draft_s},
          {"verify_s", stats.verify_s}};
}

std::string speculation_line(const Speculation& s, const SpeculationStats& stats) {
  const std::string source =
      s.self_session
          ? fmt::format("the model's first {} layers", s.self_session->options().exit_layer)
      : s.draft_model.empty() ? std::string(s.drafter->kind())
                              : fmt::format("draft model '{}'", s.draft_model);
  return fmt::format(
      "{}: {} of {} drafted tokens kept ({:.1f}%) in {} steps ({} without a draft); drafting "
      "{:.2f} s, verifying {:.2f} s",
      source, stats.accepted, stats.drafted, 100.0 * stats.acceptance(), stats.steps + stats.plain,
      stats.plain, stats.draft_s, stats.verify_s);
}

}  // namespace strata
