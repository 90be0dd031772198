// strata convert: Hugging Face checkpoint directory -> GGUF.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "offline/convert.h"

namespace strata {

Command add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face checkpoint to GGUF");
  struct Options {
    std::string dir, out, type = "f16", name;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("dir", o->dir, "Directory with config.json, *.safetensors and the tokenizer")
      ->required();
  cmd->add_option("-o,--output", o->out, "Output GGUF file")->required();
  cmd->add_option("--type", o->type,
                  "Weight type or llama-quantize mixture: " + quant_recipe_names());
  cmd->add_option("--name", o->name, "general.name (default: the directory's name)");
  return {cmd, [o] {
            const auto recipe = quant_recipe_from_name(o->type);
            if (!recipe) fail("--type '{}' is not one of {}", o->type, quant_recipe_names());
            ProgressBar bar("convert");
            convert_hf_to_gguf({o->dir, o->out, *recipe, o->name}, [&](const ConvertProgress& p) {
              bar.update(p.bytes_done, p.bytes_total,
                         fmt::format("tensors {}/{}", p.tensors_done, p.tensors_total));
            });
            bar.finish();
            fmt::print("wrote {}\n", o->out);
            return 0;
          }};
}

}  // namespace strata
