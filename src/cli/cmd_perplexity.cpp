// strata perplexity: llama.cpp-style perplexity of a text file, and llama-perplexity's KL
// divergence from a base model's saved log-probabilities (--kl-divergence-base to save them,
// --kl-divergence to compare another model with them; the file is llama.cpp's own).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/timer.h"
#include "generation/kl_divergence.h"
#include "generation/log_prob_file.h"
#include "generation/perplexity.h"

namespace strata {
namespace {

struct PerplexityOptions {
  bool mmap = false;
  std::string model = default_model_path(), file, kl_base;
  int64_t ctx = 0, chunks = 0;
  int threads = default_threads();
  bool kl = false, json = false;
  FfnFlags ffn;
};

void check_kl_flags(const PerplexityOptions& o) {
  if (o.kl && o.kl_base.empty())
    fail("--kl-divergence compares with a base: name its file with --kl-divergence-base");
  if (o.kl && !o.file.empty())
    fail("-f is not read with --kl-divergence: the tokens come from the base file");
  if (!o.kl && o.file.empty()) fail("name the text with -f (or compare with --kl-divergence)");
}

// The windows to score: the text's tokens, or with --kl-divergence the base file's.
struct Windows {
  std::vector<int32_t> tokens;
  int64_t n_ctx = 0, count = 0;
};

Windows text_windows(const PerplexityOptions& o, const Model& model, bool add_bos) {
  const std::string text = read_regular_file(o.file, kMaxTextFileBytes, "text");
  Windows w;
  w.n_ctx = o.ctx > 0 ? o.ctx : std::min<int64_t>(512, model.config.n_ctx_train);
  w.tokens = model.tokenizer->encode(text, add_bos);
  w.count = static_cast<int64_t>(w.tokens.size()) / w.n_ctx;
  if (w.count == 0)
    fail("the text has {} tokens, fewer than one window of {} (lower -c)", w.tokens.size(),
         w.n_ctx);
  if (o.chunks > 0) w.count = std::min(w.count, o.chunks);
  w.tokens.resize(w.count * w.n_ctx);
  return w;
}

Windows base_windows(const PerplexityOptions& o, const LogProbFileHeader& h) {
  if (o.ctx > 0 && o.ctx != h.n_ctx)
    fail("-c {} differs from the base file's windows of {} tokens", o.ctx, h.n_ctx);
  const int64_t count = o.chunks > 0 ? std::min(h.n_chunk, o.chunks) : h.n_chunk;
  return {h.tokens, h.n_ctx, count};
}

nlohmann::json estimate_json(const Estimate& e) {
  return {{"value", e.value}, {"uncertainty", e.uncertainty}};
}

nlohmann::json quantiles_json(const std::vector<double>& values) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < values.size(); ++i) j[fmt::format("{:g}", kQuantiles[i])] = values[i];
  return j;
}

nlohmann::json kl_json(const KlSummary& s) {
  return {{"predictions", s.predictions},
          {"ppl", estimate_json(s.ppl)},
          {"ppl_base", estimate_json(s.ppl_base)},
          {"ln_ppl_ratio", estimate_json(s.ln_ppl_ratio)},
          {"ppl_ratio", estimate_json(s.ppl_ratio)},
          {"ln_ppl_correlation", s.ln_ppl_correlation},
          {"kld", estimate_json(s.kld)},
          {"kld_quantiles", quantiles_json(s.kld_quantiles)},
          {"delta_p", estimate_json(s.delta_p)},
          {"delta_p_rms", estimate_json(s.delta_p_rms)},
          {"delta_p_quantiles", quantiles_json(s.delta_p_quantiles)},
          {"same_top", estimate_json(s.same_top)}};
}

void print_kl(const KlSummary& s) {
  const auto line = [](const char* name, const Estimate& e, double k = 1, const char* unit = "") {
    fmt::print("{:<30}: {:10.6f} ± {:10.6f}{}\n", name, k * e.value, k * e.uncertainty, unit);
  };
  fmt::print("====== Perplexity statistics ======\n");
  line("Mean PPL(Q)", s.ppl);
  line("Mean PPL(base)", s.ppl_base);
  fmt::print("{:<30}: {:6.2f}%\n", "Cor(ln(PPL(Q)), ln(PPL(base)))", 100 * s.ln_ppl_correlation);
  line("Mean ln(PPL(Q)/PPL(base))", s.ln_ppl_ratio);
  line("Mean PPL(Q)/PPL(base)", s.ppl_ratio);
  fmt::print("\n====== KL divergence statistics ======\n");
  line("Mean    KLD", s.kld);
  for (size_t i = 0; i < s.kld_quantiles.size(); ++i)
    fmt::print("{:>6.1f}% KLD: {:10.6f}\n", 100 * kQuantiles[i], s.kld_quantiles[i]);
  fmt::print("\n====== Token probability statistics ======\n");
  line("Mean    Δp", s.delta_p, 100, " %");
  for (size_t i = 0; i < s.delta_p_quantiles.size(); ++i)
    fmt::print("{:>6.1f}% Δp: {:7.3f}%\n", 100 * kQuantiles[i], 100 * s.delta_p_quantiles[i]);
  line("RMS Δp", s.delta_p_rms, 100, " %");
  line("Same top p", s.same_top, 100, " %");
}

int run_perplexity(const PerplexityOptions& o) {
  check_kl_flags(o);
  Engine engine(engine_options(o.ffn, o.model, o.mmap, o.threads), print_note);
  const Model& model = engine.model();
  const Tokenizer& tok = *model.tokenizer;
  const bool add_bos = tok.add_bos_default();
  const int64_t n_vocab = model.config.n_vocab;
  std::optional<LogProbFileReader> base;
  if (o.kl) base.emplace(o.kl_base, n_vocab);
  const Windows w = o.kl ? base_windows(o, base->header()) : text_windows(o, model, add_bos);
  std::optional<LogProbFileWriter> saved;
  if (!o.kl && !o.kl_base.empty())
    saved.emplace(o.kl_base, LogProbFileHeader{w.n_ctx, n_vocab, w.count, w.tokens});

  engine.request().logits_rows = w.n_ctx;  // every token's logits
  Session& session = engine.start(w.n_ctx);
  announce_plan(engine.planned(), o.ffn);
  KlAccumulator kl;
  const PredictionObserver observe = [&](std::span<const float> logits, int32_t next) {
    if (saved) saved->write_row(logits, next);
    if (base) kl.add(kl_prediction(logits, base->next_row(), next));
  };
  ProgressBar bar(o.kl ? "kl-divergence" : "perplexity");
  Timer timer;
  const auto r = measure_perplexity(
      session, w.tokens, add_bos ? tok.bos() : -1, w.count,
      [&](int64_t d, int64_t t) { bar.update(d, t, "windows"); }, observe);
  bar.finish();
  if (saved) saved->finish();
  const double seconds = timer.seconds();
  std::vector<double> sparsity;
  for (uint64_t z : session.ffn_zeros())
    sparsity.push_back(static_cast<double>(z) /
                       static_cast<double>(session.ffn_activations_per_layer()));
  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"file", o.kl ? o.kl_base : o.file},
                        {"n_ctx", w.n_ctx},
                        {"tokens", w.tokens.size()},
                        {"windows", r.windows},
                        {"predictions", r.predictions},
                        {"perplexity", r.perplexity},
                        {"mean_nll", r.mean_nll},
                        {"running", r.running},
                        {"seconds", seconds},
                        {"ffn_sparsity_per_layer", sparsity},
                        {"ffn", ffn_report_json(model, session)}};
    if (o.kl) j["kl_divergence"] = kl_json(kl.summary());
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("perplexity: {:.4f} over {} windows of {} tokens ({} predictions, {:.1f} s)\n",
             r.perplexity, r.windows, w.n_ctx, r.predictions, seconds);
  if (saved) fmt::print("saved the log-probabilities to {}\n", o.kl_base);
  if (o.kl) print_kl(kl.summary());
  fmt::print("FFN activation sparsity per layer (exact zeros): {:.3f}\n", fmt::join(sparsity, " "));
  if (session.options().ffn != FfnMode::Dense ||
      session.options().sparsity.mode != SparsityMode::Off)
    print_ffn_report(model, session, stdout);
  return 0;
}

}  // namespace

Command add_perplexity_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text file, or KL divergence from a base (llama.cpp's methods)");
  auto o = std::make_shared<PerplexityOptions>();
  cmd->add_flag("--mmap", o->mmap, "Use the model file in place instead of reading it");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)");
  cmd->add_option("-f,--file", o->file, "Text file");
  cmd->add_option("-c,--ctx-size", o->ctx, "Window size in tokens (default: min(512, model's))")
      ->check(in_range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--chunks", o->chunks, "Windows to evaluate (default: all)")
      ->check(in_range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--kl-divergence-base,--save-all-logits", o->kl_base,
                  "Log-probability file (llama-perplexity's): written, or with --kl-divergence "
                  "read as the base");
  cmd->add_flag("--kl-divergence", o->kl,
                "KL divergence of this model from the base named by --kl-divergence-base");
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o->json, "Print JSON");
  add_ffn_flags(cmd, o->ffn);
  add_gpu_flags(cmd, o->ffn);
  return {cmd, [o] { return run_perplexity(*o); }};
}

}  // namespace strata
