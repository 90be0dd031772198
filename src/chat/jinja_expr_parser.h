// The Jinja expression parser (tokens into expressions: operators by precedence, literals,
// calls, subscripts, filters and tests), shared by the statement parser in jinja_parser.cpp.
// Internal to the chat templates' parser.
#pragma once

#include <charconv>
#include <set>
#include <string>
#include <vector>

#include "chat/jinja_parser.h"

namespace strata::jinja::detail {

constexpr int kMaxNesting = 200;  // deeper expressions or blocks are refused, not a stack overflow

inline ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// One tag's tokens as an expression (or a statement's parts).
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : t_(tokens) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().type == Token::Type::End; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Token::Type::Name && peek(ahead).text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    const Token& t = peek();
    const std::string got = t.type == Token::Type::End ? "the end of the tag" : "'" + t.text + "'";
    throw Error(what + ", got " + got, t.line);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (peek().type != Token::Type::Name) fail("expected a name");
    return t_[i_++].text;
  }
  void expect_end() {
    if (!at_end()) fail("expected the end of the tag");
  }

  // expression, with `a if b else c`.
  ExprPtr expression(bool with_condition = true) {
    Depth d(*this);
    ExprPtr e = or_expr();
    while (with_condition && is_name("if")) {
      const int line = peek().line;
      ++i_;
      auto cond = make(Expr::Kind::Cond, line);
      cond->a = std::move(e);
      cond->b = or_expr();
      if (skip_name("else")) cond->c = expression();
      e = std::move(cond);
    }
    return e;
  }

  // Comma-separated expressions make a tuple ({{ a, b }}, `for x in a, b`).
  ExprPtr tuple(bool with_condition = true) {
    const int line = peek().line;
    ExprPtr first = expression(with_condition);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, line);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_end() || is_op(")") || is_name("if")) break;
      t->items.push_back(expression(with_condition));
    }
    return t;
  }

  // `name(args)` of a filter block, as a Filter whose operand (a) the renderer supplies.
  ExprPtr filter_call() {
    auto f = make(Expr::Kind::Filter, peek().line);
    f->name = expect_name();
    if (is_op("(")) arguments(*f);
    return f;
  }

  // Names for `for` and `set`: a, b or (a, b).
  std::vector<std::string> targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

 private:
  // The links of a left-deep chain (`1 + 1 + ...`, `x|f|g`, `a.b.c`) count as nesting: the tree
  // they build is as deep as they are long (20,000 terms overflowed the stack at load).
  struct Chain {
    explicit Chain(ExprParser& p) : p_(p) {}
    ~Chain() { p_.depth_ -= links_; }
    Chain(const Chain&) = delete;
    Chain& operator=(const Chain&) = delete;
    void link() {
      ++links_;
      if (++p_.depth_ > kMaxNesting) throw Error("expression nested too deeply", p_.peek().line);
    }
    ExprParser& p_;
    int links_ = 0;
  };

  struct Depth {
    explicit Depth(ExprParser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) throw Error("expression nested too deeply", p_.peek().line);
    }
    ~Depth() { --p_.depth_; }
    ExprParser& p_;
  };

  ExprPtr binary(Expr::Kind kind, ExprPtr a, ExprPtr b, int line, std::string name = "") {
    auto e = make(kind, line);
    e->a = std::move(a);
    e->b = std::move(b);
    e->name = std::move(name);
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    Chain chain(*this);
    while (is_name("or")) {
      chain.link();
      const int line = peek().line;
      ++i_;
      e = binary(Expr::Kind::Or, std::move(e), and_expr(), line);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    Chain chain(*this);
    while (is_name("and")) {
      chain.link();
      const int line = peek().line;
      ++i_;
      e = binary(Expr::Kind::And, std::move(e), not_expr(), line);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this);
      auto e = make(Expr::Kind::Not, peek().line);
      ++i_;
      e->a = not_expr();
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    const int line = peek().line;
    ExprPtr first = add();
    auto cmp = make(Expr::Kind::Compare, line);
    while (true) {
      std::string op;
      if (peek().type == Token::Type::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = peek().text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "notin";
        i_ += 2;
      } else {
        break;
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(add());
    }
    if (cmp->ops.empty()) return first;
    cmp->a = std::move(first);
    return cmp;
  }

  ExprPtr add() {
    ExprPtr e = concat();
    Chain chain(*this);
    while (is_op("+") || is_op("-")) {
      chain.link();
      const Token& op = t_[i_++];
      e = binary(Expr::Kind::Binary, std::move(e), concat(), op.line, op.text);
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = mul();
    Chain chain(*this);
    while (is_op("~")) {
      chain.link();
      const int line = t_[i_++].line;
      e = binary(Expr::Kind::Binary, std::move(e), mul(), line, "~");
    }
    return e;
  }

  ExprPtr mul() {
    ExprPtr e = pow();
    Chain chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link();
      const Token& op = t_[i_++];
      e = binary(Expr::Kind::Binary, std::move(e), pow(), op.line, op.text);
    }
    return e;
  }

  ExprPtr pow() {
    ExprPtr e = unary(true);
    Chain chain(*this);
    while (is_op("**")) {
      chain.link();
      const int line = t_[i_++].line;
      e = binary(Expr::Kind::Binary, std::move(e), unary(true), line, "**");
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    Depth d(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(is_op("-") ? Expr::Kind::Neg : Expr::Kind::Pos, peek().line);
      ++i_;
      e->a = unary(false);
    } else {
      e = postfix(primary());
    }
    if (with_filter) return filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    switch (t.type) {
      case Token::Type::Name: {
        ++i_;
        if (t.text == "true" || t.text == "True") return literal(Value(true), t.line);
        if (t.text == "false" || t.text == "False") return literal(Value(false), t.line);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
        auto e = make(Expr::Kind::Name, t.line);
        e->name = t.text;
        return e;
      }
      case Token::Type::String: {
        std::string s;
        while (peek().type == Token::Type::String) s += t_[i_++].text;  // 'a' 'b' is 'ab'
        return literal(Value(std::move(s)), t.line);
      }
      case Token::Type::Int: {
        ++i_;
        int64_t v = 0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (r.ec != std::errc()) throw Error("integer " + t.text + " is too large", t.line);
        return literal(Value(v), t.line);
      }
      case Token::Type::Float: {
        ++i_;
        double v = 0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (r.ec != std::errc()) throw Error("number " + t.text + " is out of range", t.line);
        return literal(Value(v), t.line);
      }
      case Token::Type::Op:
        if (skip_op("(")) {
          if (skip_op(")")) return make(Expr::Kind::Tuple, t.line);
          ExprPtr e = tuple();
          expect_op(")");
          return e;
        }
        if (skip_op("[")) {
          auto e = make(Expr::Kind::List, t.line);
          while (!is_op("]")) {
            e->items.push_back(expression());
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return e;
        }
        if (skip_op("{")) {
          auto e = make(Expr::Kind::Dict, t.line);
          while (!is_op("}")) {
            e->items.push_back(expression());
            expect_op(":");
            e->items.push_back(expression());
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return e;
        }
        break;
      case Token::Type::End:
        break;
    }
    fail("expected an expression");
  }

  static ExprPtr literal(Value v, int line) {
    auto e = make(Expr::Kind::Literal, line);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    Chain chain(*this);
    while (true) {
      chain.link();
      if (is_op(".")) {
        const int line = t_[i_++].line;
        auto a = make(Expr::Kind::Attr, line);
        if (peek().type == Token::Type::Int) {  // x.0 is x[0]
          a->kind = Expr::Kind::Item;
          const std::string& digits = t_[i_++].text;
          int64_t index = 0;
          const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), index);
          if (r.ec != std::errc()) throw Error("index " + digits + " is too large", line);
          a->b = literal(Value(index), line);
        } else {
          a->name = expect_name();
        }
        a->a = std::move(e);
        e = std::move(a);
      } else if (is_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target) {
    const int line = t_[i_++].line;  // '['
    std::vector<ExprPtr> parts(3);
    size_t part = 0;
    bool slice = false;
    while (!is_op("]")) {
      if (skip_op(":")) {
        slice = true;
        if (++part > 2) fail("expected ']'");
        continue;
      }
      if (parts[part]) fail("expected ':' or ']'");
      parts[part] = expression();
    }
    expect_op("]");
    if (!slice && !parts[0]) throw Error("an empty subscript", line);
    auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Item, line);
    e->a = std::move(target);
    if (slice) {
      e->items = std::move(parts);
    } else {
      e->b = std::move(parts[0]);
    }
    return e;
  }

  // Arguments in parentheses into e->items / e->keywords.
  void arguments(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Token::Type::Name && is_op("=", 1)) {
        e.keywords.push_back(t_[i_].text);
        i_ += 2;
        e.items.push_back(expression());
      } else {
        if (!e.keywords.empty()) fail("a positional argument after a keyword argument");
        e.items.push_back(expression());
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr target) {
    auto e = make(Expr::Kind::Call, peek().line);
    e->a = std::move(target);
    arguments(*e);
    return e;
  }

  ExprPtr filters(ExprPtr e) {
    Chain chain(*this);
    while (true) {
      chain.link();
      if (is_op("|")) {
        const int line = t_[i_++].line;
        auto f = make(Expr::Kind::Filter, line);
        f->name = expect_name();
        while (is_op(".")) {  // dotted filter names
          ++i_;
          f->name += '.';
          f->name += expect_name();
        }
        f->a = std::move(e);
        if (is_op("(")) arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        const int line = t_[i_++].line;
        auto t = make(Expr::Kind::Test, line);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->a = std::move(e);
        if (is_op("(")) {
          arguments(*t);
        } else if (starts_bare_argument()) {
          t->items.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`: a test's one argument without parentheses.
  bool starts_bare_argument() const {
    const Token& t = peek();
    if (t.type == Token::Type::String || t.type == Token::Type::Int || t.type == Token::Type::Float)
      return true;
    if (t.type == Token::Type::Op) return t.text == "[" || t.text == "{";
    if (t.type != Token::Type::Name) return false;
    static const std::set<std::string> stops = {"else", "or", "and", "if", "in", "not", "is"};
    return !stops.count(t.text);
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace strata::jinja::detail
