// strata chat: an interactive chat in the terminal (llama-cli's conversation mode): the model's
// chat template (or --chat-template), the conversation kept and re-rendered each turn (the KV
// entries of the part it shares with the last turn are reused), replies streamed as they become
// final. Ctrl-C stops a reply, not the program; Ctrl-D or /quit ends it. Commands
// (cli/chat_commands.h): /reset (a new conversation), /save FILE (the conversation as
// OpenAI-style JSON messages), /help; unknown ones are refused. Lines are edited with libedit
// on a terminal (arrows, history).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/context_fit.h"
#include "cli/chat_commands.h"
#include "cli/commands.h"
#include "cli/draft_flags.h"
#include "cli/hf_model.h"
#include "cli/ffn_flags.h"
#include "cli/flag_checks.h"
#include "cli/line_reader.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/input_file.h"
#include "generation/generator.h"
#include "generation/seed_choice.h"
#include "runtime/run_context.h"

namespace strata {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void interrupt_reply(int) { g_interrupted = true; }

struct ChatOptions {
  bool mmap = false;
  std::string model = default_model_path(), chat_template, system;
  int threads = default_threads();
  int64_t ctx = 0, n_predict = -1, seed = -1;
  SamplerParams sampling;
  FfnFlags ffn;
  HfFlag hf;
  DraftFlags draft;  // speculative decoding
};

// Ctrl-C sets a flag instead of ending the program, and interrupts a blocked read (no
// SA_RESTART), so it stops a reply or clears the line being typed.
void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = interrupt_reply;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

void save(const std::vector<ChatMessage>& history, const std::string& path) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : history) messages.push_back({{"role", m.role}, {"content", m.content}});
  write_text_file(path, messages.dump(1) + "\n");
}

// The next turn's prompt (`p`: its template output), the oldest turns of `history` left out
// when the conversation leaves the reply no room (the system prompt stays): said, never silent.
std::vector<int32_t> turn_prompt(std::vector<ChatMessage>& history, const ChatTemplate& tmpl,
                                 const Tokenizer& tok, int64_t n_ctx, int64_t n_predict,
                                 ChatPrompt& p) {
  std::vector<int32_t> prompt;
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : std::string();
  const auto tokens_of = [&](const std::vector<ChatMessage>& messages) {
    p = tmpl.apply(messages);
    const bool has_bos = !bos.empty() && p.text.compare(0, bos.size(), bos) == 0;
    prompt = tok.encode(p.text, /*add_special=*/!has_bos, /*parse_special=*/true);
    return prompt.size();
  };
  const ChatFit fit =
      fit_chat(history, static_cast<size_t>(n_ctx - reply_reserve(n_ctx, n_predict)), tokens_of);
  if (fit.dropped > 0) {
    history = fit.messages;
    fmt::print("(the {} oldest messages are left out: the context holds {} tokens)\n",
               fit.dropped, n_ctx);
  }
  tokens_of(history);
  return prompt;
}

int run_chat(const ChatOptions& o) {
  Engine engine(engine_options(o.ffn, o.model, o.mmap, o.threads), print_note);
  const Model* model = &engine.model();
  const Tokenizer& tok = *model->tokenizer;
  auto text_of = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  std::optional<ChatTemplate> tmpl;
  try {
    tmpl = ChatTemplate::select(o.chat_template, model->file->get_string("tokenizer.chat_template", ""),
                                text_of(tok.bos()), text_of(tok.eos()));
  } catch (const std::runtime_error& e) {
    fail("{}", e.what());
  }
  const int64_t n_ctx = run_context(o.ctx, model->config.n_ctx_train);
  Speculation speculation = start_speculation(o.draft, engine, n_ctx);
  Session& session = engine.start(n_ctx);
  finish_speculation(speculation, o.draft, engine);
  Generator generator(*model, session);
  generator.set_speculation(speculation.drafter.get(), speculation.params);
  GenerationParams params;
  params.max_tokens = o.n_predict;
  params.sampling = o.sampling;
  params.sampling.seed = choose_seed(o.seed, kRandomSeed, fresh_seed());
  catch_interrupts();
  fmt::print(stderr,
             "chat with {} (template {}, context {}): Ctrl-C stops a reply, Ctrl-D or /quit ends; "
             "/reset, /save FILE, /help\n",
             model->config.name.empty() ? o.model : model->config.name, tmpl->name(), n_ctx);
  std::vector<ChatMessage> history;
  if (!o.system.empty()) history.emplace_back("system", o.system);
  const std::vector<ChatMessage> start = history;
  LineReader reader;
  // At the end: what speculative decoding kept, on stderr.
  const auto done = [&] {
    if (speculation.drafter)
      fmt::print(stderr, "speculative, {}\n",
                 speculation_line(speculation, generator.speculation_stats()));
    return 0;
  };
  while (true) {
    g_interrupted = false;
    bool interrupted = false;
    const std::optional<std::string> typed = reader.read("> ", &interrupted);
    if (!typed) {
      fmt::print("\n");
      if (interrupted || g_interrupted) continue;  // Ctrl-C at the prompt: a fresh line
      return done();
    }
    const ChatLine in = parse_chat_line(*typed);
    if (in.kind == ChatLineKind::Message && in.text.empty()) continue;
    if (in.kind == ChatLineKind::Quit) return done();
    if (in.kind == ChatLineKind::Help || in.kind == ChatLineKind::Refused) {
      fmt::print("{}\n", in.kind == ChatLineKind::Help ? chat_commands_help() : in.text);
      continue;
    }
    if (in.kind == ChatLineKind::Reset) {
      history = start;
      fmt::print("(a new conversation)\n");
      continue;
    }
    if (in.kind == ChatLineKind::Save) {
      try {
        save(history, in.text);
        fmt::print("(saved {} messages to {})\n", history.size(), in.text);
      } catch (const Error& e) {
        fmt::print("error: {}\n", e.what());
      }
      continue;
    }
    const std::string& line = in.text;
    history.emplace_back("user", line);
    std::vector<int32_t> prompt;
    ChatPrompt p;
    try {
      prompt = turn_prompt(history, *tmpl, tok, n_ctx, o.n_predict, p);
      check_prompt(prompt, model->config.n_vocab, n_ctx);
    } catch (const std::runtime_error& e) {
      history.pop_back();
      fmt::print("error: {} (/reset starts a new conversation)\n", e.what());
      continue;
    }
    GenerationParams turn = params;
    turn.stop = p.stop;
    g_interrupted = false;
    const GenerationResult r = generator.generate(prompt, turn, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return !g_interrupted.load();
    });
    ++turn.sampling.seed;
    params.sampling.seed = turn.sampling.seed;
    if (r.cancelled) fmt::print(" [stopped]");
    if (r.finish_reason == "length" && !r.cancelled) fmt::print(" [the reply reached -n or the context]");
    fmt::print("\n");
    history.emplace_back("assistant", r.text);
  }
}

}  // namespace

Command add_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "Chat with a model in the terminal");
  auto o = std::make_shared<ChatOptions>();
  add_hf_flag(cmd, o->hf, cmd->add_option("-m,--model", o->model, "GGUF model file (default: the shipped model)"));
  cmd->add_flag("--mmap", o->mmap, "Use the model file in place (memory map)");
  cmd->add_option("--chat-template", o->chat_template,
                  "A built-in template's name or a Jinja file (default: the model's)");
  cmd->add_option("--system", o->system, "A system message to start the conversation with");
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(in_range(1, 1024));
  cmd->add_option("-c,--ctx-size", o->ctx, "Context size (default: the model's, at most 4096)")
      ->check(in_range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens a reply may have (-1: until it ends)")
      ->check(in_range(int64_t{-1}, int64_t{1} << 30));
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("-s,--seed", o->seed, "Random seed (-1: a new one each run)")
      ->check(in_range<int64_t>(-1, std::numeric_limits<int64_t>::max()));
  add_ffn_flags(cmd, o->ffn);
  add_draft_flags(cmd, o->draft);
  add_gpu_flags(cmd, o->ffn);
  return {cmd, [o] {
            ChatOptions given = *o;
            use_hf_model(given.hf, given.model);
            return run_chat(given);
          }};
}

}  // namespace strata
