// strata run: generate text from a prompt, streaming tokens, then a timing line.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "chat/json_schema_grammar.h"
#include "cli/commands.h"
#include "cli/draft_flags.h"
#include "cli/hf_model.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/prompt_escapes.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "core/timer.h"
#include "generation/context_shift.h"
#include "generation/grammar_constraint.h"
#include "generation/sampler.h"
#include "generation/seed_choice.h"
#include "generation/speculative.h"
#include "runtime/run_context.h"
#include "runtime/session.h"

namespace strata {

namespace {

struct RunOptions {
  bool mmap = false;
  std::string model = default_model_path();
  std::string prompt, prompt_file;
  bool escape = true;  // llama.cpp's default
  int n_predict = 128;
  int threads = default_threads();
  int64_t ctx = 0;
  int64_t seed = -1;
  bool no_bos = false;
  bool context_shift = false;
  int64_t keep = 0;
  bool json = false;
  SamplerParams sampling;
  DraftFlags draft;  // speculative decoding
  std::string grammar, grammar_file, json_schema, json_schema_file;
  FfnFlags ffn;
  HfFlag hf;
};

void add_run_flags(CLI::App* cmd, RunOptions& o) {
  cmd->add_flag("--mmap", o.mmap,
                "Use the model file in place (memory map) instead of reading it into huge-page "
                "memory: faster start, slower decode");
  add_hf_flag(cmd, o.hf, cmd->add_option("-m,--model", o.model, "GGUF model file (default: the shipped model)"));
  auto* text = cmd->add_option("-p,--prompt", o.prompt, "Prompt text");
  cmd->add_option("-f,--file", o.prompt_file, "File holding the prompt (instead of -p)")
      ->excludes(text);
  cmd->add_flag("-e,--escape,!--no-escape", o.escape,
                "Turn \\n, \\t, \\\\ ... in the prompt into the characters (default: on, as "
                "llama.cpp)");
  cmd->add_option("-n,--n-predict", o.n_predict, "Tokens to generate (-1: until EOS or full)")
      ->check(in_range(-1, 1 << 30));
  cmd->add_option("-t,--threads", o.threads, "Threads")->check(in_range(1, 1024));
  cmd->add_option("-c,--ctx-size", o.ctx, "Context size (default: the model's, at most 4096)")
      ->check(in_range(int64_t{0}, int64_t{1} << 24));
  add_sampling_flags(cmd, o.sampling);
  cmd->add_option("-s,--seed", o.seed, "Random seed (-1: a new one each run)")
      ->check(in_range<int64_t>(-1, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--grammar", o.grammar, "GBNF grammar the output must follow");
  cmd->add_option("--grammar-file", o.grammar_file, "File with a GBNF grammar");
  cmd->add_option("-j,--json-schema", o.json_schema,
                  "JSON schema the output must follow (a JSON text; {} for any JSON object)");
  cmd->add_option("--json-schema-file", o.json_schema_file, "File with a JSON schema");
  cmd->add_flag("--no-bos", o.no_bos, "Do not add the BOS token");
  cmd->add_flag("--context-shift,!--no-context-shift", o.context_shift,
                "When the context is full, drop the older half of what follows --keep's tokens "
                "and go on (default: stop, as llama.cpp)");
  cmd->add_option("--keep", o.keep,
                  "Prompt tokens a context shift keeps after BOS (-1: the whole prompt)")
      ->check(in_range<int64_t>(-1, int64_t{1} << 24));
  cmd->add_flag("--json", o.json, "Print the timing report as JSON on stderr");
  add_draft_flags(cmd, o.draft);
  add_ffn_flags(cmd, o.ffn);
  add_gpu_flags(cmd, o.ffn);
}

struct Generation {
  int generated = 0;
  int shifts = 0;       // context shifts
  int64_t dropped = 0;  // tokens they dropped
  double prompt_s = 0, decode_s = 0;
  bool context_full = false;
  std::optional<SpeculationStats> speculation;  // speculative decoding's
};

// Prints a drawn token of the generation; false when the generation ends with it (EOS, no token
// the grammar allows, the grammar's end, -n reached).
bool take_token(Generation& g, int32_t t, const Tokenizer& tok, const GrammarConstraint* constraint,
                int n_predict) {
  if (t < 0 || t == tok.eos()) return false;
  ++g.generated;
  const std::string piece = tok.token_bytes(t);
  if (tok.has_text(t)) std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
  if (constraint && constraint->finished()) return false;
  return n_predict < 0 || g.generated < n_predict;
}

// Speculative decoding: generate()'s tokens (the same draws), several a pass where the draft
// holds (generation/speculative.h); the context's end stops it (no shift).
Generation generate_speculative(Session& session, Sampler& sampler, GrammarConstraint* constraint,
                                const Tokenizer& tok, const std::vector<int32_t>& prompt,
                                const Speculation& speculation, const RunOptions& o) {
  Generation g;
  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  Timer prompt_timer;
  const auto logits = session.eval(prompt);
  g.prompt_s = prompt_timer.seconds();
  std::vector<int32_t> history = prompt;
  Timer decode_timer;
  SpeculativeDecoder spec(session, sampler, constraint, *speculation.drafter, speculation.params);
  bool go = o.n_predict != 0;
  if (go) {
    const int32_t first = sampler.sample(logits, history, constraint);
    if (first >= 0) history.push_back(first);
    go = take_token(g, first, tok, constraint, o.n_predict);
  }
  while (go) {
    if (session.n_past() >= session.n_ctx()) {
      g.context_full = true;
      break;
    }
    spec.step(history, [&](int32_t t) {
      go = take_token(g, t, tok, constraint, o.n_predict);
      return !go;
    });
  }
  g.decode_s = decode_timer.seconds();
  g.speculation = spec.stats();
  std::fputs("\n", stdout);
  std::fflush(stdout);
  return g;
}

// Streams the continuation of `prompt` to stdout until -n tokens, EOS or a full context.
Generation generate(Session& session, Sampler& sampler, GrammarConstraint* constraint,
                    const Tokenizer& tok, const std::vector<int32_t>& prompt, int64_t keep,
                    const RunOptions& o) {
  Generation g;
  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  Timer prompt_timer;
  auto logits = session.eval(prompt);
  g.prompt_s = prompt_timer.seconds();
  std::vector<int32_t> history = prompt;     // what the sampler's penalties read
  std::vector<int32_t> in_context = prompt;  // what the KV cache holds
  Timer decode_timer;
  while (o.n_predict != 0) {
    const int32_t next = sampler.sample(logits, history, constraint);
    if (next >= 0) history.push_back(next);
    if (!take_token(g, next, tok, constraint, o.n_predict)) break;
    if (session.n_past() >= session.n_ctx()) {
      if (!o.context_shift) {
        g.context_full = true;
        break;
      }
      const ContextShift shift = plan_context_shift(session.n_past(), keep);
      logits = shift_context(session, in_context, shift, next);
      ++g.shifts;
      g.dropped += shift.discard;
      continue;
    }
    in_context.push_back(next);
    logits = session.eval(next);
  }
  g.decode_s = decode_timer.seconds();
  std::fputs("\n", stdout);
  std::fflush(stdout);
  return g;
}

void print_generation_notes(const Generation& g, const Session& session, int64_t keep) {
  if (g.context_full)
    fmt::print(stderr, "note: stopped, the context ({}) is full (--context-shift goes on)\n",
               session.n_ctx());
  if (g.shifts > 0)
    fmt::print(stderr,
               "note: the context ({}) shifted {} times, dropping {} tokens after the first {}\n",
               session.n_ctx(), g.shifts, g.dropped, keep);
}

void report(const Generation& g, const Speculation& speculation, size_t prompt_tokens,
            double load_s, uint64_t seed, const Model& model, const Session& session, bool json) {
  const double prompt_tps = prompt_tokens / g.prompt_s;
  const double decode_tps = g.generated > 0 ? g.generated / g.decode_s : 0.0;
  if (json) {
    const nlohmann::json j = {{"prompt_tokens", prompt_tokens},
                              {"prompt_tokens_per_s", prompt_tps},
                              {"generated_tokens", g.generated},
                              {"decode_tokens_per_s", decode_tps},
                              {"load_s", load_s},
                              {"peak_rss_bytes", peak_rss_bytes()},
                              {"seed", seed},
                              {"context_shifts", g.shifts},
                              {"context_dropped_tokens", g.dropped},
                              {"speculative", g.speculation ? speculation_json(speculation, *g.speculation)
                                                            : nlohmann::json()},
                              {"ffn", ffn_report_json(model, session)}};
    fmt::print(stderr, "{}\n", j.dump());
    return;
  }
  fmt::print(stderr,
             "prompt: {} tokens, {:.1f} tok/s | decode: {} tokens, {:.1f} tok/s | load: {:.2f} s "
             "| peak memory: {:.1f} MiB | seed: {}\n",
             prompt_tokens, prompt_tps, g.generated, decode_tps, load_s,
             peak_rss_bytes() / 1048576.0, seed);
  if (g.speculation)
    fmt::print(stderr, "speculative, {}\n", speculation_line(speculation, *g.speculation));
  if (session.options().ffn != FfnMode::Dense ||
      session.options().sparsity.mode != SparsityMode::Off)
    print_ffn_report(model, session, stderr);
}

// The grammar --grammar(-file) or --json-schema(-file) gives, compiled; none without them.
std::shared_ptr<const Grammar> output_grammar(const RunOptions& o) {
  const int given = !o.grammar.empty() + !o.grammar_file.empty() + !o.json_schema.empty() +
                    !o.json_schema_file.empty();
  if (given == 0) return nullptr;
  if (given > 1) fail("give one of --grammar, --grammar-file, --json-schema, --json-schema-file");
  std::string gbnf = o.grammar;
  if (!o.grammar_file.empty())
    gbnf = read_regular_file(o.grammar_file, kMaxJsonFileBytes, "grammar");
  std::string schema = o.json_schema, where = "--json-schema";
  if (!o.json_schema_file.empty()) {
    schema = read_regular_file(o.json_schema_file, kMaxJsonFileBytes, "JSON schema");
    where = fmt::format("'{}'", o.json_schema_file);
  }
  if (!schema.empty()) {
    nlohmann::ordered_json j;
    try {
      check_json_depth(measure_json(schema), where);
      j = nlohmann::ordered_json::parse(schema);
    } catch (const nlohmann::json::exception& e) {
      fail("{} is not valid JSON: {}", where, e.what());
    }
    try {
      gbnf = json_schema_grammar(j);
    } catch (const SchemaError& e) {
      fail("{}: {}", where, e.what());
    }
  }
  return std::make_shared<const Grammar>(Grammar::parse(gbnf));
}

// The prompt as llama.cpp takes it: -p or the file -f, its escapes processed unless --no-escape.
std::string prompt_text(const RunOptions& o) {
  const std::string text = o.prompt_file.empty()
                               ? o.prompt
                               : read_regular_file(o.prompt_file, kMaxTextFileBytes, "prompt");
  return o.escape ? process_escapes(text) : text;
}

int run_generation(const RunOptions& o) {
  if (o.keep != 0 && !o.context_shift)
    fail("--keep N says what a context shift keeps: add --context-shift");
  check_draft_flags(o.draft);
  if (o.draft.on() && o.context_shift)
    fail("speculative decoding stops at the context's end: --context-shift is for plain "
         "decoding");
  const auto grammar = output_grammar(o);  // a bad grammar or schema fails before any loading
  Engine engine(engine_options(o.ffn, o.model, o.mmap, o.threads), print_note);
  const Model& model = engine.model();
  const Tokenizer& tok = *model.tokenizer;
  const int64_t n_ctx = run_context(o.ctx, model.config.n_ctx_train);
  const auto prompt = tok.encode(o.prompt, /*add_special=*/!o.no_bos);
  if (prompt.empty()) fail("the prompt is empty and the model has no BOS token");
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    fail("the prompt has {} tokens but the context holds {} (raise -c)", prompt.size(), n_ctx);
  const int64_t keep =
      tokens_kept(o.keep, static_cast<int64_t>(prompt.size()), !o.no_bos && tok.add_bos_default());
  if (o.context_shift && plan_context_shift(n_ctx, keep).discard < 1)
    fail("--keep keeps {} of the context's {} positions: a context shift would drop nothing", keep,
         n_ctx);
  SamplerParams sp = o.sampling;
  sp.seed = choose_seed(o.seed, kRandomSeed, fresh_seed());
  Speculation speculation = start_speculation(o.draft, engine, n_ctx);
  Session& session = engine.start(n_ctx);
  finish_speculation(speculation, o.draft, engine);
  announce_plan(engine.planned(), o.ffn);
  Sampler sampler(sp);
  std::unique_ptr<GrammarConstraint> constraint;
  if (grammar) constraint = std::make_unique<GrammarConstraint>(grammar, tok);
  const Generation g =
      speculation.drafter
          ? generate_speculative(session, sampler, constraint.get(), tok, prompt, speculation, o)
          : generate(session, sampler, constraint.get(), tok, prompt, keep, o);
  print_generation_notes(g, session, keep);
  report(g, speculation, prompt.size(), engine.load_seconds(), sp.seed, model, session, o.json);
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  add_run_flags(cmd, *o);
  return {cmd, [o] {
            RunOptions given = *o;
            use_hf_model(given.hf, given.model);
            given.prompt = prompt_text(given);
            return run_generation(given);
          }};
}

}  // namespace strata
