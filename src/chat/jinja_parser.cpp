#include "chat/jinja_parser.h"

#include <charconv>
#include <set>

#include "chat/jinja_expr_parser.h"

namespace strata::jinja {

namespace {

using detail::ExprParser;
using detail::kMaxNesting;
using detail::make;

// Pieces into statements.
class StatementParser {
 public:
  explicit StatementParser(const std::vector<Piece>& pieces) : p_(pieces) {}

  Body document() {
    std::string end;
    Body body = block({}, end);
    return body;
  }

 private:
  // Statements up to one of `ends` (a tag's first word), which it returns in `end`.
  Body block(const std::set<std::string>& ends, std::string& end, int depth = 0) {
    if (depth > kMaxNesting) throw Error("blocks nested too deeply", line());
    const int opened = i_ > 0 ? p_[i_ - 1].line : 0;  // the tag this block belongs to
    Body body;
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_];
      if (piece.type == Piece::Type::Text) {
        auto n = node(Node::Kind::Text, piece.line);
        n->text = piece.text;
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (piece.type == Piece::Type::Output) {
        ExprParser e(piece.tokens);
        auto n = node(Node::Kind::Output, piece.line);
        n->expr = e.tuple();
        e.expect_end();
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (piece.tokens.front().type != Token::Type::Name)
        throw Error("a statement must start with a tag name", piece.line);
      const std::string& tag = piece.tokens.front().text;
      if (ends.count(tag)) {
        end = tag;
        return body;
      }
      body.push_back(statement(tag, depth));
    }
    for (const auto& e : ends)
      if (e.rfind("end", 0) == 0)
        throw Error("the block opened here is never closed: expected " + e, opened);
    return body;
  }

  int line() const { return i_ < p_.size() ? p_[i_].line : (p_.empty() ? 0 : p_.back().line); }

  static std::unique_ptr<Node> node(Node::Kind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }

  // Parses the tag at i_ (its first word `tag`) and what it encloses.
  std::unique_ptr<Node> statement(const std::string& tag, int depth) {
    const Piece& piece = p_[i_++];
    ExprParser e(piece.tokens);
    e.expect_name();
    std::string end;
    if (tag == "if") {
      auto n = node(Node::Kind::If, piece.line);
      n->conditions.push_back(e.expression());
      e.expect_end();
      while (true) {
        n->bodies.push_back(block({"elif", "else", "endif"}, end, depth + 1));
        const Piece& at = p_[i_++];
        ExprParser branch(at.tokens);
        branch.expect_name();
        if (end == "elif") {
          n->conditions.push_back(branch.expression());
          branch.expect_end();
          continue;
        }
        branch.expect_end();
        if (end == "else") {
          n->else_body = block({"endif"}, end, depth + 1);
          ExprParser closing(p_[i_++].tokens);
          closing.expect_name();
          closing.expect_end();
        }
        return n;
      }
    }
    if (tag == "for") {
      auto n = node(Node::Kind::For, piece.line);
      n->targets = e.targets();
      if (!e.skip_name("in")) e.fail("expected 'in'");
      n->expr = e.tuple(/*with_condition=*/false);
      if (e.skip_name("if")) n->filter = e.expression();
      if (e.is_name("recursive")) e.fail("recursive loops are not supported");
      e.expect_end();
      n->body = block({"else", "endfor"}, end, depth + 1);
      ExprParser closing(p_[i_++].tokens);
      closing.expect_name();
      closing.expect_end();
      if (end == "else") {
        n->else_body = block({"endfor"}, end, depth + 1);
        ExprParser c2(p_[i_++].tokens);
        c2.expect_name();
        c2.expect_end();
      }
      return n;
    }
    if (tag == "set") {
      auto n = node(Node::Kind::Set, piece.line);
      if (e.peek().type == Token::Type::Name && e.is_op(".", 1)) {  // set ns.attr = value
        auto obj = make(Expr::Kind::Name, piece.line);
        obj->name = e.expect_name();
        e.expect_op(".");
        n->target_object = std::move(obj);
        n->attribute = e.expect_name();
      } else {
        n->targets = e.targets();
      }
      if (e.at_end()) {  // {% set x %}...{% endset %}
        if (n->target_object || n->targets.size() != 1)
          throw Error("a block set takes one name", piece.line);
        n->kind = Node::Kind::SetBlock;
        n->body = block({"endset"}, end, depth + 1);
        ExprParser closing(p_[i_++].tokens);
        closing.expect_name();
        closing.expect_end();
        return n;
      }
      e.expect_op("=");
      n->expr = e.tuple();
      e.expect_end();
      return n;
    }
    if (tag == "macro") {
      auto n = node(Node::Kind::Macro, piece.line);
      n->text = e.expect_name();
      e.expect_op("(");
      while (!e.is_op(")")) {
        n->targets.push_back(e.expect_name());
        n->defaults.push_back(e.skip_op("=") ? e.expression() : nullptr);
        if (!e.skip_op(",")) break;
      }
      e.expect_op(")");
      e.expect_end();
      n->body = block({"endmacro"}, end, depth + 1);
      ExprParser closing(p_[i_++].tokens);
      closing.expect_name();
      if (closing.peek().type == Token::Type::Name) closing.expect_name();  // endmacro name
      closing.expect_end();
      return n;
    }
    if (tag == "filter") {  // {% filter name(args) %}...{% endfilter %}
      auto n = node(Node::Kind::FilterBlock, piece.line);
      n->expr = e.filter_call();
      e.expect_end();
      n->body = block({"endfilter"}, end, depth + 1);
      ExprParser closing(p_[i_++].tokens);
      closing.expect_name();
      closing.expect_end();
      return n;
    }
    if (tag == "generation") {
      e.expect_end();
      auto n = node(Node::Kind::Generation, piece.line);
      n->body = block({"endgeneration"}, end, depth + 1);
      ExprParser closing(p_[i_++].tokens);
      closing.expect_name();
      closing.expect_end();
      return n;
    }
    if (tag == "break" || tag == "continue") {
      e.expect_end();
      return node(tag == "break" ? Node::Kind::Break : Node::Kind::Continue, piece.line);
    }
    throw Error("unsupported or unexpected tag '" + tag + "'", piece.line);
  }

  const std::vector<Piece>& p_;
  size_t i_ = 0;
};

}  // namespace

Body parse(const std::vector<Piece>& pieces) {
  return StatementParser(pieces).document();
}

}  // namespace strata::jinja
