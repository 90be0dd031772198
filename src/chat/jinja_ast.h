// A parsed template: expressions and statements as the renderer walks them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace strata::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // literal
    Name,     // name
    List,     // items
    Tuple,    // items (a tuple is a list to the renderer)
    Dict,     // items: key, value, key, value, ...
    Attr,     // a.name
    Item,     // a[b]
    Slice,    // a[items[0]:items[1]:items[2]], any of them null
    Call,     // a(args)
    Filter,   // a | name(args)
    Test,     // a is [not] name(args); negated
    Not,      // not a
    Neg,      // -a
    Pos,      // +a
    Binary,   // a op b: + - * / // % ** ~
    Compare,  // a ops[0] items[0] ops[1] items[1] ...: == != < > <= >= in notin
    And,      // a and b
    Or,       // a or b
    Cond,     // a if b else c (c null: undefined)
  };
  Kind kind = Kind::Literal;
  int line = 0;
  Value literal;
  std::string name;  // Name, Attr, Filter, Test; the operator of Binary
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;          // see Kind; the arguments of Call, Filter and Test
  std::vector<std::string> keywords;   // names of the last keywords.size() arguments
  std::vector<std::string> ops;        // Compare
  bool negated = false;                // Test
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    Text,       // text
    Output,     // {{ expr }}
    If,         // conditions[i] -> bodies[i]; else_body
    For,        // for targets in expr [if filter] body [else else_body]
    Set,        // set targets = expr, or set expr_target.attribute = expr
    SetBlock,   // set targets[0] %} body {% endset
    Macro,      // macro name(params = defaults) body
    Break,
    Continue,
    Generation,  // {% generation %} body: rendered as is (Hugging Face's assistant-mask tag)
    FilterBlock,  // {% filter expr %} body: expr (a Filter without operand) applied to the body
  };
  Kind kind = Kind::Text;
  int line = 0;
  std::string text;
  ExprPtr expr, filter, target_object;  // target_object: the namespace of `set ns.x`
  std::string attribute;                // `set ns.x`: x
  std::vector<std::string> targets;     // loop or set names; macro parameters
  std::vector<ExprPtr> defaults;        // macro parameter defaults (null: none)
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body, else_body;
};

}  // namespace strata::jinja
