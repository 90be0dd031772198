// strata serve: the OpenAI-compatible HTTP server (src/server/), llama-server's flags.
#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <limits>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/draft_flags.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/hf_model.h"
#include "cli/sampling_flags.h"
#include "core/anonymous_memory.h"
#include "core/error.h"
#include "generation/slot_context.h"
#include "runtime/run_context.h"
#include "server/http_server.h"
#include "server/signal_policy.h"

namespace strata {

namespace {
HttpServer* g_server = nullptr;  // for the signal handlers
volatile sig_atomic_t g_terms = 0;
volatile sig_atomic_t g_loading = 1;

// SIGINT and SIGTERM (Kubernetes, systemd, docker stop): server/signal_policy.h.
extern "C" void on_stop_signal(int sig) {
  const SignalAction action = signal_action(sig, g_loading != 0, g_terms);
  if (sig == SIGTERM) g_terms = g_terms + 1;
  if (action == SignalAction::Exit) {
    static const char message[] = "stopped while the model was loading\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(128 + sig);  // as the signal's default action would report it
  }
  if (g_server == nullptr) return;
  if (action == SignalAction::Drain)
    g_server->drain();
  else
    g_server->stop();
}

// The flags: the server's own options bound where they are its fields (host, port, key,
// template, defaults, queue), the rest converted once by server_options and engine_options.
struct ServeOptions {
  bool mmap = false;
  std::string model = default_model_path();
  std::string alias, pooling, reasoning_format = "auto";
  int threads = default_threads();
  int64_t ctx = 0;
  FfnFlags ffn;
  double timeout_s = 10;
  double drain_timeout_s = 30;  // Kubernetes' default grace period
  int threads_http = 0;         // 0: slots + queue + 32
  int parallel = 4;
  std::string request_memory = "64M";
  ServerOptions server;
  HfFlag hf;
  DraftFlags draft;  // speculative decoding, per slot
};

void add_serve_flags(CLI::App* cmd, ServeOptions& o) {
  add_hf_flag(
      cmd, o.hf,
      cmd->add_option("-m,--model", o.model, "GGUF model file (default: the shipped model)"));
  cmd->add_flag("--mmap", o.mmap, "Use the model file in place (memory map)");
  cmd->add_option("--host", o.server.host, "Address to listen on");
  cmd->add_option("--port", o.server.port, "Port to listen on")->check(in_range(1, 65535));
  cmd->add_option("--api-key", o.server.api_key, "Require \"Authorization: Bearer KEY\" on /v1/*");
  cmd->add_option("-a,--alias", o.alias, "Model name the API reports (default: the file's)");
  cmd->add_option("--chat-template", o.server.chat_template,
                  "Chat template for /v1/chat/completions: a built-in name (strata chat-template "
                  "--list) or a Jinja file (default: the model's tokenizer.chat_template, else "
                  "the plain transcript)");
  cmd->add_option("--pooling", o.pooling,
                  "How /v1/embeddings pools the final hidden states: mean, cls or last (default: "
                  "the model's <arch>.pooling_type, else mean)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  cmd->add_option("--reasoning-format", o.reasoning_format,
                  "A chat reply's <think> thoughts: auto or deepseek put them in "
                  "reasoning_content, none leaves them in content (a request's "
                  "reasoning_format overrides)")
      ->check(CLI::IsMember({"none", "auto", "deepseek"}));
  cmd->add_option("-t,--threads", o.threads, "Threads")->check(in_range(1, 1024));
  cmd->add_option("-c,--ctx-size", o.ctx,
                  "Context of all slots together, split evenly among them (default: each slot "
                  "the model's context, at most 4096)")
      ->check(in_range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("--parallel", o.parallel,
                  "Sequence slots (-np): requests generating at once, batched in each step")
      ->check(in_range(1, 256));
  cmd->add_option("--max-queue", o.server.scheduler.max_queue,
                  "Requests that may wait for a slot; more are answered 503 with Retry-After")
      ->check(in_range(0, 65536));
  cmd->add_option("-n,--n-predict", o.server.defaults.max_tokens,
                  "Tokens to generate when a request sets no max_tokens (-1: until EOS or full)")
      ->check(in_range(int64_t{-1}, int64_t{1} << 30));
  add_sampling_flags(cmd, o.server.defaults.sampling, "Default");
  cmd->add_option("-s,--seed", o.server.defaults.seed,
                  "Seed of requests that name none (-1: a new one for each request, as OpenAI "
                  "and llama-server draw)")
      ->check(in_range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--drain-timeout", o.drain_timeout_s,
                  "On SIGTERM, seconds requests in flight may take to finish (new ones get 503) "
                  "before they are cancelled; a second SIGTERM, or SIGINT, stops at once")
      ->check(in_range(0.0, 86400.0));
  cmd->add_option("--timeout", o.timeout_s,
                  "Seconds a client has to send a whole request (line, headers, body) from its "
                  "first byte; the keep-alive idle limit is the smaller of this and 5 s")
      ->check(in_range(0.1, 3600.0));
  cmd->add_option("--threads-http", o.threads_http,
                  "Most requests served at once, threads started as needed (0: slots + queue "
                  "+ 32); idle connections hold none")
      ->check(in_range(0, 65536));
  cmd->add_option("--request-memory", o.request_memory,
                  "Memory for request bodies and their parsed JSON, all requests together (at "
                  "least 16M); a request that finds it full is answered 503. Counted in "
                  "--ram-budget")
      ->check(kNotEmpty);
  add_ffn_flags(cmd, o.ffn);
  add_draft_flags(cmd, o.draft);
  add_gpu_flags(cmd, o.ffn);
}

// The model's name in the API: --alias, else the file's general.name, else its file name.
std::string model_name(const ServeOptions& o, const Model* model) {
  if (!o.alias.empty()) return o.alias;
  if (model != nullptr && !model->config.name.empty()) return model->config.name;
  return std::filesystem::path(o.model).filename().string();
}

// The server's options: those the flags bound, and the ones converted here.
ServerOptions server_options(const ServeOptions& o) {
  ServerOptions options = o.server;
  if (!o.pooling.empty()) options.pooling = parse_pooling(o.pooling);
  options.defaults.reasoning_format = *reasoning_format_from_name(o.reasoning_format);
  options.model_name = model_name(o, nullptr);  // until the model is loaded (attach names it)
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1e3));
  options.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1e3));
  options.connections.receive_timeout = timeout;
  options.connections.idle_timeout = std::min(timeout, options.connections.idle_timeout);
  options.connections.worker_threads =
      o.threads_http > 0 ? o.threads_http : o.parallel + options.scheduler.max_queue + 32;
  options.request_memory_bytes = parse_bytes(o.request_memory, "--request-memory");
  check_draft_flags(o.draft);
  if (options.request_memory_bytes < 2 * options.max_body_bytes)
    fail(
        "--request-memory {} holds less than two bodies of the largest size ({} MiB each); give "
        "at least {}M",
        o.request_memory, options.max_body_bytes >> 20, 2 * (options.max_body_bytes >> 20));
  return options;
}

// glibc raises its mmap threshold to the size of any large block freed (up to 32 MiB), after
// which request bodies come from the worker threads' arenas, whose free tops malloc_trim does
// not return: RSS grew 16 MiB per wave of 8 MB bodies and stayed (bench/serve_attack.py).
// Fixed thresholds keep every large buffer (bodies, documents) in its own mapping, given back
// when freed, and arenas trimmed past 1 MiB of free top.
void return_large_blocks_to_the_system() {
  ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 20);
}

// The slots' context: llama-server's rule, -c shared by the slots. Without it, each slot gets
// the model's context unless the KV cache of all slots would not fit
// (generation/slot_context.h).
int64_t slot_context(const ServeOptions& o, const Model& model, const RunRequest& r) {
  const uint64_t kv_per_position = Session::kv_cache_bytes(model.config, 1, r.kv.k, r.kv.v);
  const uint64_t memory = r.budgets.ram > 0 ? r.budgets.ram : AnonymousMemory::available();
  const int64_t model_ctx = run_context(0, model.config.n_ctx_train);
  const int64_t n_ctx = o.ctx > 0 ? o.ctx / o.parallel
                                  : default_slot_context(model.config.n_ctx_train, o.parallel,
                                                         kv_per_position, memory);
  if (o.ctx == 0 && n_ctx < model_ctx)
    fmt::print(stderr,
               "note: each of the {} slots gets a context of {} (not the model's {}) so that "
               "their KV cache fits in half of {:.1f} GiB; set -c (shared by the slots) or "
               "--cache-type-k/-v f16 to choose\n",
               o.parallel, n_ctx, model_ctx, static_cast<double>(memory) / (1 << 30));
  if (n_ctx < 2)
    fail("-c {} split among {} slots (--parallel) leaves {} positions each; raise -c", o.ctx,
         o.parallel, n_ctx);
  return n_ctx;
}

// The engine the server serves, opened while the server already listens, with its draft
// model's when speculating.
std::unique_ptr<Engine> load(const ServeOptions& o, EngineOptions options,
                             Speculation& speculation) {
  auto engine = std::make_unique<Engine>(std::move(options), print_note);
  const int64_t n_ctx = slot_context(o, engine->model(), engine->request());
  speculation = start_speculation(o.draft, *engine, n_ctx);
  engine->start(n_ctx);
  finish_speculation(speculation, o.draft, *engine);
  announce_plan(engine->planned(), o.ffn);
  return engine;
}

int serve(const ServeOptions& o) {
  return_large_blocks_to_the_system();
  const ServerOptions options = server_options(o);
  // Every flag the engine reads is checked before the port is bound.
  EngineOptions engine_opts = engine_options(o.ffn, o.model, o.mmap, o.threads);
  engine_opts.run.logits_rows = engine_opts.run.n_seq = o.parallel;
  engine_opts.run.front_end_bytes =
      server_ram_bytes(options);  // the HTTP side, inside --ram-budget
  // Declared before the server, so that it outlives the server's scheduler (which runs on the
  // engine's session).
  std::unique_ptr<Engine> engine;
  Speculation speculation;
  // The port answers before the model is loaded (/health: 503 "loading"), so a load balancer
  // or a readiness probe sees a replica that is starting, and a busy port fails at once.
  HttpServer server(options);
  const int port = server.bind();
  g_server = &server;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::thread http([&server] { server.listen(); });
  // A load that takes a while is announced (a quick one, or one that fails at once, is not:
  // its error stays the only line).
  std::mutex m;
  std::condition_variable loaded_cv;
  bool load_ended = false;
  std::thread notice([&] {
    std::unique_lock lock(m);
    if (!loaded_cv.wait_for(lock, std::chrono::seconds(1), [&] { return load_ended; })) {
      fmt::print(stderr, "listening on http://{}:{} (/health: loading) while {} loads\n",
                 options.host, port, o.model);
      std::fflush(stderr);
    }
  });
  auto end_notice = [&] {
    {
      std::lock_guard lock(m);
      load_ended = true;
    }
    loaded_cv.notify_all();
    notice.join();
  };
  try {
    engine = load(o, std::move(engine_opts), speculation);
    server.attach(engine->model(), engine->session(), model_name(o, &engine->model()),
                  speculation.drafter.get(), speculation.params);
  } catch (...) {
    end_notice();
    server.stop();
    http.join();
    g_server = nullptr;
    throw;
  }
  end_notice();
  g_loading = 0;
  fmt::print(stderr,
             "serving {} on http://{}:{} ({} slots of context {}, queue {}, {} threads, chat "
             "template {}, {} pooling): POST /v1/completions, /v1/chat/completions, "
             "/v1/embeddings; GET /v1/models, /health, /metrics, /slots\n",
             model_name(o, &engine->model()), options.host, port, o.parallel,
             engine->session().n_ctx(), options.scheduler.max_queue, engine->options().threads,
             server.chat_template_name(), pooling_name(server.pooling()));
  std::fflush(stderr);
  http.join();
  g_server = nullptr;
  fmt::print(stderr, "stopped\n");
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  auto o = std::make_shared<ServeOptions>();
  add_serve_flags(cmd, *o);
  return {cmd, [o] {
            ServeOptions given = *o;
            use_hf_model(given.hf, given.model);
            return serve(given);
          }};
}

}  // namespace strata
