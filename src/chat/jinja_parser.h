// Pieces to a tree, with Jinja2's operator precedence (filters and tests bind tighter than
// arithmetic; `not` looser than comparisons). Statements: if/elif/else, for (tuple targets, an
// inline `if`, else), set (names, tuples, a namespace's attribute, a block), macro,
// break/continue, filter blocks, generation. Anything else is an Error naming the tag and line.
#pragma once

#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace strata::jinja {

Body parse(const std::vector<Piece>& pieces);

}  // namespace strata::jinja
