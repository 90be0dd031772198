// JSON strings a schema constrains by their text: `pattern` (a regular expression, translated to
// GBNF), `format` (date, time, date-time, uuid, ipv4, email) and the keys of an object's
// additional properties (any key but the listed ones). Each returns a GBNF expression for the
// whole JSON string, quotes included, whose decoded text is what the keyword accepts; it may
// use the `char` rule of json_schema_grammar's primitives. Where a construct cannot be spelled
// exactly, what is written is a subset of what the keyword accepts (documented at each), never
// more; what cannot be enforced at all is a SchemaError naming it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/schema_error.h"

namespace strata {

// ECMA-262 as JSON Schema reads it, a search (a side without ^ or $ takes any text there):
// literals, ., [classes] with ranges and negation, \d \w \s and their negations, escapes
// (\n \t \xHH \uHHHH, escaped punctuation), ( groups ) including (?: and named ones, |, and
// * + ? {m} {m,} {m,n} (lazy forms alike: the same strings). Refused: backreferences,
// lookaround, word boundaries, anchors inside the pattern, counts above 1000. Characters JSON
// must escape are written escaped; control characters other than \n \t \r \b \f, and escapes
// such as \u0041 for plain characters, are not written (a subset).
std::string pattern_string_gbnf(const std::string& pattern);

// The formats listed above as subsets of their RFCs that python3-jsonschema's format checker
// accepts (dates: days that exist in every year, years 1000-9999; email: dot-atoms of letters,
// digits and ._%+-); nullopt for any other format.
std::optional<std::string> format_string_gbnf(const std::string& format);

// A JSON string (plain characters, no escapes, so that no escaped spelling slips past) other
// than each of `names`.
std::string key_not_in_gbnf(const std::vector<std::string>& names);

}  // namespace strata
