// JSON schemas to grammars on arbitrary JSON (issue 52): the converter either writes a grammar
// (which then compiles, or fails on a grammar limit) or refuses with SchemaError naming the
// keyword; nothing else may escape. $ref chains and nesting are bounded (a chain of 20,000
// once overflowed the stack), as is the JSON's own depth (the server's body limit).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/json_schema_grammar.h"
#include "core/json_limits.h"
#include "generation/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const strata::JsonShape shape = strata::measure_json(text);
  if (shape.depth > strata::kMaxJsonDepth || shape.values > 20000) return 0;  // the server's bounds
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
  if (schema.is_discarded()) return 0;
  try {
    const std::string gbnf = strata::json_schema_grammar(schema);
    const strata::Grammar g = strata::Grammar::parse(gbnf);
    strata::GrammarState state(g);
    for (char c : std::string("{\"a\": [1, \"x\", null]}")) {
      if (!state.advance(static_cast<unsigned char>(c))) break;
    }
  } catch (const strata::SchemaError&) {
  } catch (const strata::Error&) {
  }
  return 0;
}
