#include "cli/llama_flags.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace strata {

namespace {

enum class Meaning {
  Alias,   // strata's option of another name (`target`)
  Drop,    // what strata does anyway (with the value llama.cpp takes, when `values` lists it)
  Refuse,  // no such thing in strata: `hint` says what to use
};

struct LlamaFlag {
  std::string_view spelling;
  Meaning meaning;
  const char* target;  // Alias: strata's long option
  const char* hint;    // where strata has no such option (in this command, or at all)
  std::array<std::string_view, 4> drop_values{};  // Drop: the values that keep strata's behaviour
};

constexpr LlamaFlag kFlags[] = {
    {"-np", Meaning::Alias, "--parallel", "requests at once are `strata serve --parallel N`"},
    {"-ctk", Meaning::Alias, "--cache-type-k", "the KV cache's type is set where a model runs"},
    {"-ctv", Meaning::Alias, "--cache-type-v", "the KV cache's type is set where a model runs"},
    {"-ngl", Meaning::Alias, "--n-gpu-layers", "layers on the GPU are set where a model runs"},
    {"--gpu-layers", Meaning::Alias, "--n-gpu-layers", "layers on the GPU are set where a model runs"},
    {"-ub", Meaning::Alias, "--ubatch-size", "the prompt batch is set where a model runs"},
    {"-sys", Meaning::Alias, "--system",
     "`strata run` takes the prompt as it is; `strata chat --system TEXT` applies the chat "
     "template"},
    {"--system-prompt", Meaning::Alias, "--system",
     "`strata run` takes the prompt as it is; `strata chat --system TEXT` applies the chat "
     "template"},
    {"--context-shift", Meaning::Alias, "--context-shift",
     "`strata run --context-shift` generates past a full context; chat and serve drop a "
     "conversation's oldest turns to fit it, and say so"},
    {"--keep", Meaning::Alias, "--keep",
     "`strata run --context-shift --keep N` keeps N prompt tokens; chat and serve keep the "
     "system prompt"},
    {"-cnv", Meaning::Refuse, nullptr, "conversation is `strata chat -m FILE`"},
    {"--conversation", Meaning::Refuse, nullptr, "conversation is `strata chat -m FILE`"},
    {"--interactive", Meaning::Refuse, nullptr, "conversation is `strata chat -m FILE`"},
    {"-no-cnv", Meaning::Drop, nullptr, nullptr},
    {"--no-conversation", Meaning::Drop, nullptr, nullptr},
    {"-fa", Meaning::Drop, nullptr,
     "strata's attention is always computed flash style (blocks of the cache, an online "
     "softmax); it cannot be turned off",
     {"on", "auto", "1", "true"}},
    {"--flash-attn", Meaning::Drop, nullptr,
     "strata's attention is always computed flash style (blocks of the cache, an online "
     "softmax); it cannot be turned off",
     {"on", "auto", "1", "true"}},
    {"--no-mmap", Meaning::Drop, nullptr, nullptr},
    {"--mlock", Meaning::Refuse, nullptr,
     "strata reads the weights into memory it allocates (--mmap maps the file instead); it "
     "does not lock pages"},
    {"-md", Meaning::Alias, "--model-draft",
     "a draft model is given where text is generated (run, chat, bench, serve)"},
    {"-ngld", Meaning::Alias, "--gpu-layers-draft",
     "a draft model's GPU layers are given where text is generated (run, chat, bench, serve)"},
    {"-td", Meaning::Alias, "--threads-draft",
     "a draft model's threads are given where text is generated (run, chat, bench, serve)"},
    {"-hf", Meaning::Alias, "--hf-repo", "a Hugging Face model is pulled where a model is loaded (run, serve, chat)"},
    {"-hfr", Meaning::Alias, "--hf-repo", "a Hugging Face model is pulled where a model is loaded (run, serve, chat)"},
    {"-hff", Meaning::Refuse, nullptr,
     "strata picks the file by its quantization: -hf user/repo:QUANT"},
    {"-ot", Meaning::Refuse, nullptr,
     "strata places tensors by its plan: --n-gpu-layers, --vram-budget and --ram-budget bound "
     "it"},
    {"--override-tensor", Meaning::Refuse, nullptr,
     "strata places tensors by its plan: --n-gpu-layers, --vram-budget and --ram-budget bound "
     "it"},
    {"-co", Meaning::Refuse, nullptr, "strata prints plain text"},
    {"--color", Meaning::Refuse, nullptr, "strata prints plain text"},
};

const LlamaFlag* find_flag(std::string_view arg) {
  for (const LlamaFlag& f : kFlags)
    if (f.spelling == arg) return &f;
  return nullptr;
}

bool is_drop_value(const LlamaFlag& f, std::string_view v) {
  return std::find(f.drop_values.begin(), f.drop_values.end(), v) != f.drop_values.end() &&
         !v.empty();
}

bool takes_values(const LlamaFlag& f) {
  return !f.drop_values[0].empty();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> with_strata_spellings(
    const std::vector<std::string>& args, const std::function<bool(std::string_view)>& has_option) {
  std::vector<std::string> out;
  const std::string command = args.empty() ? std::string() : args[0];
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {  // the rest are values, whatever they look like
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const LlamaFlag* f = i == 0 ? nullptr : find_flag(args[i]);
    if (f == nullptr) {
      out.push_back(args[i]);
      continue;
    }
    switch (f->meaning) {
      case Meaning::Alias:
        if (!has_option(f->target)) {
          if (args[i] == f->target)
            fail("{} is not an option of strata {}: {}", args[i], command, f->hint);
          fail("{} (strata's {}) is not an option of strata {}: {}", args[i], f->target,
               command, f->hint);
        }
        out.push_back(f->target);
        break;
      case Meaning::Drop:
        if (takes_values(*f) && i + 1 < args.size() && args[i + 1][0] != '-') {
          if (!is_drop_value(*f, args[i + 1]))
            fail("{} {}: {}", args[i], args[i + 1], f->hint);
          ++i;  // llama.cpp's value, the behaviour strata has
        }
        break;
      case Meaning::Refuse:
        fail("{} is llama.cpp's; {}", args[i], f->hint);
    }
  }
  return out;
}

std::string closest_flag(std::string_view typed, const std::vector<std::string>& names) {
  const std::string_view bare = typed.substr(0, typed.find('='));
  std::string best, prefixed, stem;
  int prefixes = 0;
  size_t best_distance = bare.size() / 3 + 1;
  for (const std::string& n : names) {
    if (n.size() > bare.size() && n.compare(0, bare.size(), bare) == 0 && bare.size() >= 4) {
      ++prefixes;
      prefixed = n;
    }
    // A name the typed flag starts with ("--temp" in "--temprature"): the longest one.
    if (n.size() >= 5 && n.size() < bare.size() && bare.compare(0, n.size(), n) == 0 &&
        n.size() > stem.size())
      stem = n;
    const size_t d = edit_distance(bare, n);
    if (d < best_distance) {
      best_distance = d;
      best = n;
    }
  }
  if (!best.empty()) return best;
  if (prefixes == 1) return prefixed;
  return stem;
}

}  // namespace strata
