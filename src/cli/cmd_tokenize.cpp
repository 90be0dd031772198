// strata tokenize: text to token ids (one prompt, or a JSON array of strings with --batch).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "format/gguf.h"
#include "model/tokenizer.h"

namespace strata {

Command add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  struct Options {
    std::string model = default_model_path(), prompt, batch;
    bool no_bos = false, json = false, pieces = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("-m,--model", o->model, "GGUF file with a tokenizer");
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
  cmd->add_option("--batch", o->batch,
                  "JSON file holding an array of strings; prints a JSON array of id arrays");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS token");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--pieces", o->pieces, "Print each token's text next to its id");
  return {cmd, [o] {
            const auto f = GgufFile::open(o->model);
            const auto tok = Tokenizer::from_gguf(*f);
            const bool bos = !o->no_bos;  // BOS/EOS as the vocabulary adds them
            if (!o->batch.empty()) {
              const std::string text = read_regular_file(o->batch, kMaxJsonFileBytes, "JSON");
              nlohmann::json texts;
              try {
                texts = parse_json_bounded(text, fmt::format("'{}'", o->batch));
              } catch (const nlohmann::json::exception& e) {
                fail("'{}' is not valid JSON: {}", o->batch, e.what());
              }
              if (!texts.is_array()) fail("'{}' must hold a JSON array of strings", o->batch);
              nlohmann::json out = nlohmann::json::array();
              for (const auto& t : texts) {
                if (!t.is_string()) fail("'{}' must hold only strings", o->batch);
                out.push_back(tok->encode(t.get<std::string>(), bos));
              }
              fmt::print("{}\n", out.dump());
              return 0;
            }
            const auto ids = tok->encode(o->prompt, bos);
            if (o->json) {
              fmt::print("{}\n", nlohmann::json(ids).dump());
            } else if (o->pieces) {
              for (int32_t id : ids) fmt::print("{:>6} '{}'\n", id, tok->token_text(id));
            } else {
              fmt::print("{}\n", fmt::join(ids, " "));
            }
            return 0;
          }};
}

}  // namespace strata
