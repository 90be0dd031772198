// A JSON Schema to a GBNF grammar (generation/grammar.h) whose every sentence is a JSON text that
// the schema accepts: response_format's json_schema and llama.cpp's json_schema field.
// Supported: type (one or a list), object (properties in the schema's order, required ones
// always, optional ones maybe; additionalProperties false, or a schema for an object without
// properties), array (items, minItems, maxItems), string (minLength, maxLength), integer, number,
// boolean, null, enum, const, anyOf, $ref into #/$defs or #/definitions (recursion included);
// annotations (title, description, default, examples, $schema, $id, $comment) are ignored as
// they constrain nothing. A keyword that would constrain what this cannot enforce (pattern,
// format, minimum, oneOf, ...) is refused: SchemaError names it, so a request is never answered
// with JSON its schema rejects.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace strata {

class SchemaError : public std::runtime_error {
 public:
  SchemaError(const std::string& keyword, const std::string& message)
      : std::runtime_error(message), keyword_(keyword) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

std::string json_schema_grammar(const nlohmann::ordered_json& schema);

}  // namespace strata
