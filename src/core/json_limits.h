// Bounds on JSON text before it becomes a document. nlohmann's parser builds whatever the text
// describes: 8 million '[' (8 MB) became 617 MiB of nested arrays, and 4 million small
// numbers 64-128 MiB of elements. One linear pass over the text (no allocation) measures its
// nesting and its number of values first, so that a caller refuses, or accounts for, the
// document's memory before it exists.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

namespace strata {

// Deeper than any request, plan, profile or tokenizer file strata reads (they nest < 12).
inline constexpr int kMaxJsonDepth = 64;

struct JsonShape {
  int depth = 0;            // deepest nesting of arrays and objects
  uint64_t values = 0;      // elements and members, counted from separators (an upper bound)
  uint64_t text_bytes = 0;  // length of the text
  // Heap bytes the parsed document holds at most: per value a map node or a vector slot with
  // its growth slack and a string's own allocation (96 bytes covers each), plus the strings'
  // characters (at most the text).
  uint64_t document_bytes() const { return values * 96 + text_bytes; }
};

// The shape of `text`, read as JSON is (strings and their escapes skipped); it does not
// validate: a malformed text is the parser's to refuse.
JsonShape measure_json(std::string_view text);

// Fails (Error naming `what`) when `shape` nests deeper than `max_depth`.
void check_json_depth(const JsonShape& shape, const std::string& what,
                      int max_depth = kMaxJsonDepth);

// Parses `text` after checking its nesting is at most `max_depth`: deeper is an Error naming
// `what` ("the request body", "plan 'p.json'"), before anything is allocated. Syntax errors are
// nlohmann's exceptions, as from nlohmann::json::parse.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& what,
                                  int max_depth = kMaxJsonDepth);

}  // namespace strata
