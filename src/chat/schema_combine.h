// allOf and oneOf as json_schema_grammar enforces them: allOf merged into one schema that holds
// every branch's constraints; oneOf taken as anyOf only where no two branches can take the same
// value (else a value the grammar writes might match two, which oneOf rejects).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "chat/schema_error.h"

namespace strata {

// A schema with a $ref to the schema it names; any other schema as it is.
using SchemaResolver = std::function<const nlohmann::ordered_json&(const nlohmann::ordered_json&)>;

// `schema` without its allOf, every branch's keywords merged in: properties by name (a name in
// two branches takes both schemas, as an allOf), required as the union, types as the
// intersection, bounds as the tightest, additionalProperties false as leaving out what a closed
// branch does not list. Keywords set differently that cannot be merged are a SchemaError
// naming allOf and the keyword.
nlohmann::ordered_json merge_all_of(const nlohmann::ordered_json& schema, const SchemaResolver& resolve);

// True only where no value can match both schemas: their const/enum values, their types, or, for
// objects, a property both require whose schemas never meet, or a key one requires that the
// other's additionalProperties false forbids. False when unsure.
bool never_both(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b, const SchemaResolver& resolve);

}  // namespace strata
