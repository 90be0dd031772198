// strata quantize IN OUT TYPE: llama-quantize's command for strata's types and mixtures.
#include <fmt/format.h>

#include <fstream>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "offline/quantize.h"

namespace strata {

namespace {

std::string type_counts(const QuantizeReport& r) {
  std::string s;
  for (uint32_t id = 0; id < 64; ++id)
    if (r.by_type[id] > 0)
      if (const auto info = dtype_info(id))
        s += fmt::format("{}{} {}", s.empty() ? "" : ", ", r.by_type[id], info->name);
  return s;
}

// The flags' manual type choices (parsing only: the rules are offline/type_overrides.cpp).
TypeOverrides type_overrides(const std::string& output, const std::string& embedding,
                             const std::vector<std::string>& specs, const std::string& file) {
  TypeOverrides o;
  if (!output.empty()) o.output = writable_type(output, "--output-tensor-type");
  if (!embedding.empty()) o.token_embedding = writable_type(embedding, "--token-embedding-type");
  for (const std::string& s : specs) add_tensor_type_override(o, s);
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) fail("--tensor-type-file: cannot open '{}'", file);
    for (std::string word; in >> word;) add_tensor_type_override(o, word);  // as llama-quantize
  }
  return o;
}

}  // namespace

Command add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "Quantize a GGUF model to a type or llama-quantize mixture (Q4_K_M, Q6_K, ...)");
  struct Options {
    std::string in, out, type;
    bool pure = false, keep_predictors_f16 = false, quantize_predictors = false;
    int threads = 0;
    std::string output_type, embedding_type, tensor_type_file, imatrix;
    std::vector<std::string> tensor_types;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("input", o->in, "GGUF model with F32, F16 or BF16 weights")->required();
  cmd->add_option("output", o->out, "Output GGUF file (written as OUTPUT.tmp, then renamed)")
      ->required();
  cmd->add_option("type", o->type, "Type or mixture: " + quant_recipe_names())->required();
  cmd->add_option("nthreads", o->threads, "Threads, as llama-quantize's last argument")
      ->check(in_range(1, 1024));
  cmd->add_flag("--pure", o->pure, "Every matrix the base type: no mixture, no Q6_K output");
  cmd->add_flag("--keep-predictors-f16", o->keep_predictors_f16,
                "Keep PowerInfer predictors (fc1/fc2) F16 (the default)");
  cmd->add_flag("--quantize-predictors", o->quantize_predictors,
                "Quantize the predictors too (Q4_0 in Q4_0 files, Q8_0 otherwise)")
      ->excludes("--keep-predictors-f16");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--output-tensor-type", o->output_type, "Type of output.weight (as it is)");
  cmd->add_option("--token-embedding-type", o->embedding_type,
                  "Type of token_embd.weight (as it is)");
  cmd->add_option("--tensor-type", o->tensor_types,
                  "PATTERN=TYPE: tensors whose name matches the regular expression get TYPE "
                  "(first match wins; repeatable), as llama-quantize")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--tensor-type-file", o->tensor_type_file,
                  "A file of PATTERN=TYPE words (whitespace-separated), as --tensor-type");
  cmd->add_option("--imatrix", o->imatrix,
                  "llama-imatrix's importance matrix (GGUF or legacy .dat): the K-quants weigh "
                  "each value's rounding error by its column's importance");
  return {cmd, [o] {
            const auto recipe = quant_recipe_from_name(o->type);
            if (!recipe)
              fail("unknown quantization type '{}' (one of {})", o->type, quant_recipe_names());
            QuantizeOptions q;
            q.input = o->in;
            q.output = o->out;
            q.recipe = *recipe;
            q.pure = o->pure;
            q.quantize_predictors = o->quantize_predictors;
            q.overrides = type_overrides(o->output_type, o->embedding_type, o->tensor_types,
                                         o->tensor_type_file);
            q.imatrix = o->imatrix;
            q.threads =
                o->threads > 0 ? o->threads : static_cast<int>(std::thread::hardware_concurrency());
            ProgressBar bar("quantize");
            const QuantizeReport r =
                quantize_model(q, [&](uint64_t done, uint64_t total) { bar.update(done, total); });
            bar.finish();
            fmt::print("wrote {} ({}): {:.1f} -> {:.1f} MB, {} tensors: {}{}\n", o->out,
                       quant_recipe_name(*recipe), r.input_bytes / 1e6, r.output_bytes / 1e6,
                       r.tensors, type_counts(r),
                       q.imatrix.empty() ? std::string()
                                         : fmt::format("; {} weighted by the imatrix", r.weighted));
            return 0;
          }};
}

}  // namespace strata
