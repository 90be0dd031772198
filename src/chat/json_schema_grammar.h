// A JSON Schema to a GBNF grammar (generation/grammar.h) whose every sentence is a JSON text that
// the schema accepts: response_format's json_schema and llama.cpp's json_schema field.
// Supported: type (one or a list), object (properties in the schema's order, required ones
// always, optional ones maybe; additionalProperties false, true or a schema: extra keys other
// than the listed ones), array (items, minItems, maxItems), string (minLength, maxLength,
// pattern, format: chat/schema_strings.h), integer and number (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum: chat/schema_numbers.h), boolean, null, enum, const, anyOf,
// oneOf and allOf (chat/schema_combine.h; keywords beside anyOf/oneOf hold in each branch), $ref
// into #/$defs or #/definitions (recursion included); annotations (title, description, default,
// examples, $schema, $id, $comment) are ignored as they constrain nothing. Where a keyword
// cannot be spelled exactly the grammar writes a subset of what it accepts, never more; a
// keyword that would constrain what this cannot enforce (multipleOf, uniqueItems, not,
// patternProperties, if/then/else, a oneOf whose branches may overlap, ...) is refused:
// SchemaError names it, so a request is never answered with JSON its schema rejects.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "chat/schema_error.h"

namespace strata {

std::string json_schema_grammar(const nlohmann::ordered_json& schema);

}  // namespace strata
