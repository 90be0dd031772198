// Template source to pieces: text, `{{ expression }}` and `{% statement %}`, each tag's inside
// split into tokens. Whitespace is handled here as Hugging Face's chat-template environment has
// Jinja2 do it: trim_blocks (a block tag eats the newline after it), lstrip_blocks (spaces and
// tabs before a block tag on its line go), `-` and `+` at a tag's edges, newlines normalised to
// "\n" and one trailing newline dropped. Comments vanish.
#pragma once

#include <string>
#include <vector>

namespace strata::jinja {

struct Token {
  enum class Type { Name, String, Int, Float, Op, End };
  Type type = Type::End;
  std::string text;  // a name, an operator, a number's digits, a string's decoded value
  int line = 0;
};

struct Piece {
  enum class Type { Text, Output, Statement };
  Type type = Type::Text;
  std::string text;           // Text
  std::vector<Token> tokens;  // Output and Statement, ending with an End token
  int line = 0;
};

// The pieces of a template, or jinja::Error naming the line.
std::vector<Piece> lex(const std::string& source);

}  // namespace strata::jinja
