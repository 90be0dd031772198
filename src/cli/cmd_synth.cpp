// strata synth: write a random-weight LLaMA-shaped model for tests and benchmarks.
#include <fmt/format.h>

#include <cctype>

#include "backends/cpu/matvec.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "model/arch/architecture.h"
#include "offline/synth.h"
#include "tensor/kquants.h"

namespace strata {

namespace {

struct SynthOptions {
  std::string preset = "tiny", type = "f32", ffn, out, tokenizer_from, arch = "llama", expert_type;
  int64_t embd = 0, ff = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, ctx = 0;
  int64_t head_dim = 0;
  int64_t experts = 0, top_k = 0, window = 0, shared_ff = 0;
  std::string expert_layout = "stacked";
  uint64_t seed = 1;
  bool tied = false;
  double density = 0, context = 0;
  int64_t rank = 64;
  bool powerinfer = false;
  bool keep_down = false;
};

void add_synth_flags(CLI::App* cmd, SynthOptions& o) {
  cmd->add_option("--preset", o.preset,
                  "Shape: tiny, 1b, 7b, 13b, mixtral, falcon-7b, falcon-40b, opt-6.7b");
  cmd->add_option("--type", o.type,
                  "Weight type: f32, f16, bf16, q8_0, q4_0, ... (a type strata can write)");
  cmd->add_option("--expert-type", o.expert_type,
                  "The routed experts' type where it differs from --type (gpt-oss's files: mxfp4 "
                  "experts, q8_0 the rest)");
  cmd->add_option("--arch", o.arch,
                  "Architecture: " + architecture_names() +
                      "; mixtral: llama with 8 experts, 2 per token (unless --experts, --top-k; "
                      "qwen3moe's too)");
  cmd->add_option("--ffn", o.ffn,
                  "FFN variant: " + ffn_activation_names() + " (default: the architecture's)");
  cmd->add_option("-o,--output", o.out, "Output GGUF file")->required();
  cmd->add_option("--embd", o.embd, "Override the embedding size");
  cmd->add_option("--ff", o.ff, "Override the FFN size");
  cmd->add_option("--layers", o.layers, "Override the layer count");
  cmd->add_option("--heads", o.heads, "Override the head count");
  cmd->add_option("--kv-heads", o.kv_heads, "Override the key/value head count");
  cmd->add_option("--head-dim", o.head_dim,
                  "A head size other than embd / heads (Gemma 3: 256 where 1152 / 4 is 288)");
  cmd->add_option("--vocab", o.vocab, "Override the vocabulary size");
  cmd->add_option("--ctx", o.ctx, "Override the training context length");
  cmd->add_option("--sliding-window", o.window,
                  "Sliding-window attention (Mistral's): each token attends to this many last "
                  "positions, its own included");
  cmd->add_option("--experts", o.experts,
                  "A mixture of experts: this many experts per layer (llama, bamboo)");
  cmd->add_option("--top-k", o.top_k, "With --experts: experts each token uses (default 2)");
  cmd->add_option("--shared-ff", o.shared_ff,
                  "qwen2moe: the shared expert's FFN size (default: an expert's)");
  cmd->add_option("--expert-layout", o.expert_layout,
                  "With --experts: stacked (3-D tensors, llama.cpp since 2024) or split (one "
                  "tensor per expert, older files)")
      ->check(CLI::IsMember({"stacked", "split"}));
  cmd->add_option("--seed", o.seed, "Random seed")->check(fits<uint64_t>());
  cmd->add_flag("--tied", o.tied, "No output.weight: the head reuses the embedding");
  cmd->add_option("--sparsity", o.density,
                  "Make the FFN sparse by construction: about this share of neurons fires per "
                  "token (e.g. 0.1), power-law hotness, with predictors and ffn_down_t")
      ->check(in_range(0.0, 0.99));
  cmd->add_option("--predictor-rank", o.rank, "Rank of the predictors written with --sparsity")
      ->check(in_range(int64_t{3}, int64_t{1} << 16));
  cmd->add_flag("--powerinfer", o.powerinfer,
                "Write PowerInfer's layout (PWRI magic, global threshold); needs --sparsity");
  cmd->add_flag("--keep-down", o.keep_down,
                "With --sparsity: also write ffn_down (row-major), so dense mode reads it as "
                "llama.cpp would");
  cmd->add_option("--context", o.context,
                  "With --sparsity: share of the residual that is local context (a windowed "
                  "average over the last ~25 tokens), so neighbouring tokens share neurons, as in "
                  "text (e.g. 0.6)")
      ->check(in_range(0.0, 0.95));
  cmd->add_option("--tokenizer-from", o.tokenizer_from, "Copy the tokenizer of this GGUF file");
}

// A type synth can write rows of (computable, with a quantizer), or a one-line error listing them.
DType writable_type(const std::string& text, const char* flag) {
  const auto type = dtype_from_name(text);
  if (type && dtype_info(*type).computable && dtype_info(*type).quantize != nullptr) return *type;
  std::string names;
  for (const DTypeInfo& t : all_dtypes())
    if (t.computable && t.quantize != nullptr) {
      std::string name = t.name;
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      names += (names.empty() ? "" : ", ") + name;
    }
  fail("{} '{}' is not one of {}", flag, text, names);
}

// The flags as a model's spec: the preset, then the type, architecture, FFN and shape
// overrides, each checked.
SynthSpec synth_spec(const SynthOptions& o) {
  SynthSpec s = synth_preset(o.preset);
  s.type = writable_type(o.type, "--type");
  if (!o.expert_type.empty()) s.expert_type = writable_type(o.expert_type, "--expert-type");
  const bool mixtral = o.arch == "mixtral";  // a llama file with experts
  if (mixtral && s.shape.n_expert == 0) s.shape.n_expert = 8, s.shape.n_expert_used = 2;
  const Architecture* arch = find_architecture(mixtral ? "llama" : o.arch);
  if (arch == nullptr) fail("--arch '{}' is not one of {}", o.arch, architecture_names());
  if (arch->always_experts && s.shape.n_expert == 0)
    s.shape.n_expert = 8, s.shape.n_expert_used = 2;
  s.shape.architecture = std::string(arch->name);
  s.shape.arch = arch;
  s.shape.ffn = arch->ffn;
  if (!o.ffn.empty()) {
    const auto ffn = ffn_activation_from_name(o.ffn);
    if (!ffn) fail("--ffn '{}' is not one of {}", o.ffn, ffn_activation_names());
    s.shape.ffn = *ffn;
  }
  auto take = [](int64_t v, int64_t& field, const char* flag) {
    if (v < 0 || v > (int64_t{1} << 24)) fail("{} {} is out of range", flag, v);
    if (v > 0) field = v;
  };
  take(o.embd, s.shape.n_embd, "--embd");
  take(o.ff, s.shape.n_ff, "--ff");
  take(o.layers, s.shape.n_layer, "--layers");
  take(o.heads, s.shape.n_head, "--heads");
  take(o.kv_heads, s.shape.n_head_kv, "--kv-heads");
  take(o.head_dim, s.shape.head_dim, "--head-dim");
  take(o.vocab, s.shape.n_vocab, "--vocab");
  take(o.ctx, s.shape.n_ctx_train, "--ctx");
  take(o.window, s.shape.sliding_window, "--sliding-window");
  take(o.experts, s.shape.n_expert, "--experts");
  take(o.top_k, s.shape.n_expert_used, "--top-k");
  take(o.shared_ff, s.shape.n_ff_shared, "--shared-ff");
  if (s.shape.n_expert > 0 && s.shape.n_expert_used == 0)
    s.shape.n_expert_used = std::min<int64_t>(2, s.shape.n_expert);
  if (s.shape.n_expert == 0 && s.shape.n_expert_used > 0) fail("--top-k needs --experts");
  s.stacked_experts = o.expert_layout == "stacked";
  s.seed = o.seed;
  s.tied_output = o.tied;
  s.tokenizer_from = o.tokenizer_from;
  s.density = o.density;
  s.predictor_rank = o.rank;
  s.powerinfer_layout = o.powerinfer;
  s.keep_down = o.keep_down;
  s.context = o.context;
  const int64_t block = dtype_info(s.type).block_size;
  if (s.shape.n_embd % block != 0 || s.shape.n_ff % block != 0)
    fail(
        "--type {} needs rows of whole {}-value blocks: embd {} and ffn {} are not "
        "(set --embd/--ff, or quantize an F16 model with strata quantize, which falls "
        "back per tensor)",
        dtype_name(s.type), block, s.shape.n_embd, s.shape.n_ff);
  if (s.density > 0 && !is_float_type(s.type) && o.rank % 32 != 0)
    fail("--predictor-rank must be a multiple of 32 for {} weights", dtype_name(s.type));
  return s;
}

int synth(const SynthOptions& o) {
  const SynthSpec s = synth_spec(o);
  ProgressBar bar("synth");
  write_synthetic_model(s, o.out, [&](uint64_t d, uint64_t t) { bar.update(d, t); });
  bar.finish();
  const std::string experts = s.shape.moe() ? fmt::format(", {} experts, {} per token",
                                                          s.shape.n_expert, s.shape.n_expert_used)
                                            : "";
  fmt::print("wrote {} ({} layers, embd {}, ffn {} {}{}, {})\n", o.out, s.shape.n_layer,
             s.shape.n_embd, s.shape.n_ff, ffn_activation_name(s.shape.ffn), experts,
             dtype_name(s.type));
  return 0;
}

}  // namespace

Command add_synth_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "Write a random-weight model (tests, benchmarks)");
  auto o = std::make_shared<SynthOptions>();
  add_synth_flags(cmd, *o);
  return {cmd, [o] { return synth(*o); }};
}

}  // namespace strata
