// strata batched: N sequences from one prompt decoded together (llama.cpp's and PowerInfer's
// batched example), through the server's batch scheduler: each step reads every weight row once
// for all N. Prints each sequence and the aggregate speed; a benchmark of the batch path.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/timer.h"
#include "generation/batch_scheduler.h"

namespace strata {

namespace {

struct BatchedOptions {
  bool mmap = false;
  std::string model = default_model_path();
  std::string prompt = "In the beginning";
  int parallel = 4;
  int n_predict = 32;
  int threads = default_threads();
  int64_t ctx = 0;
  int64_t seed = 0;
  bool json = false;
  bool quiet = false;
  SamplerParams sampling;
  FfnFlags ffn;
};

void add_batched_flags(CLI::App* cmd, BatchedOptions& o) {
  cmd->add_option("-m,--model", o.model, "GGUF model file (default: the shipped model)");
  cmd->add_flag("--mmap", o.mmap, "Use the model file in place (memory map)");
  cmd->add_option("-p,--prompt", o.prompt, "Prompt text, shared by every sequence");
  cmd->add_option("--parallel", o.parallel, "Sequences decoded together (-np)")
      ->check(in_range(1, 256));
  cmd->add_option("-n,--n-predict", o.n_predict, "Tokens to generate per sequence")
      ->check(in_range(1, 1 << 20));
  cmd->add_option("-t,--threads", o.threads, "Threads")->check(in_range(1, 1024));
  cmd->add_option("-c,--ctx-size", o.ctx,
                  "Context per sequence (default: the prompt and -n tokens)")
      ->check(in_range(int64_t{0}, int64_t{1} << 24));
  add_sampling_flags(cmd, o.sampling);
  cmd->add_option("-s,--seed", o.seed, "Seed of sequence 0; sequence i uses seed + i")
      ->check(in_range<int64_t>(0, std::numeric_limits<int64_t>::max()));
  cmd->add_flag("--json", o.json, "Print the report as JSON on stdout (and no texts)");
  cmd->add_flag("-q,--quiet", o.quiet, "Print only the report");
  add_ffn_flags(cmd, o.ffn);
  add_gpu_flags(cmd, o.ffn);
}

int batched(const BatchedOptions& o) {
  EngineOptions engine_opts = engine_options(o.ffn, o.model, o.mmap, o.threads);
  engine_opts.run.logits_rows = engine_opts.run.n_seq = o.parallel;
  Engine engine(std::move(engine_opts), print_note);
  const Model* model = &engine.model();
  const Tokenizer& tok = *model->tokenizer;
  const auto prompt = tok.encode(o.prompt, /*add_special=*/true);
  if (prompt.empty()) fail("the prompt is empty and the model has no BOS token");
  const int64_t n_ctx = o.ctx > 0 ? o.ctx : static_cast<int64_t>(prompt.size()) + o.n_predict + 1;
  Session& session = engine.start(n_ctx);
  announce_plan(engine.planned(), o.ffn);
  SchedulerOptions so;
  so.max_queue = 1;
  BatchScheduler scheduler(*model, session, so);
  GenerationParams params;
  params.max_tokens = o.n_predict;
  params.sampling = o.sampling;
  params.sampling.seed = static_cast<uint64_t>(o.seed);
  Timer wall;
  const auto job = scheduler.submit({prompt, params, o.parallel});
  std::vector<JobHandle::Piece> pieces;
  while (!job->wait(pieces, std::chrono::milliseconds(100))) {
  }
  const double seconds = wall.seconds();
  scheduler.stop();
  const SchedulerMetrics m = scheduler.metrics();
  const auto& results = job->results();
  int64_t generated = 0;
  for (const GenerationResult& r : results) generated += r.completion_tokens;
  const double decode_tps =
      m.decode_s > 0 ? static_cast<double>(m.generated_tokens) / m.decode_s : 0;
  const double per_step = m.steps > 0 ? static_cast<double>(m.step_tokens) / m.steps : 0;
  if (o.json) {
    nlohmann::json report = {
        {"model", o.model},
        {"backend", session.backend().name()},
        {"ffn", ffn_mode_name(session.options().ffn)},
        {"parallel", o.parallel},
        {"prompt_tokens", prompt.size()},
        {"generated_tokens", generated},
        {"seconds", seconds},
        {"prompt_tokens_per_s", m.prompt_s > 0 ? m.prompt_tokens / m.prompt_s : 0},
        {"decode_tokens_per_s", decode_tps},
        {"decode_tokens_per_s_per_sequence", decode_tps / o.parallel},
        {"steps", m.steps},
        {"tokens_per_step", per_step}};
    fmt::print("{}\n", report.dump(2));
    return 0;
  }
  if (!o.quiet)
    for (size_t i = 0; i < results.size(); ++i)
      fmt::print("sequence {} ({}): {}{}\n\n", i, results[i].finish_reason, o.prompt,
                 results[i].text);
  fmt::print(stderr,
             "{} sequences: prompt {} tokens ({:.1f} tok/s), {} generated in {:.3f} s: decode "
             "{:.1f} tok/s together, {:.1f} per sequence; {} steps of {:.1f} tokens\n",
             o.parallel, prompt.size(), m.prompt_s > 0 ? m.prompt_tokens / m.prompt_s : 0.0,
             generated, seconds, decode_tps, decode_tps / o.parallel, m.steps, per_step);
  return 0;
}

}  // namespace

Command add_batched_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "batched", "Decode several sequences from one prompt together (the batch path's benchmark)");
  auto o = std::make_shared<BatchedOptions>();
  add_batched_flags(cmd, *o);
  return {cmd, [o] { return batched(*o); }};
}

}  // namespace strata
