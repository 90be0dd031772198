#include "chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "chat/jinja_value.h"
#include "model/unicode.h"

namespace strata::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// "\r\n" and "\r" to "\n"; then one trailing newline dropped (keep_trailing_newline=False).
std::string normalize(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t c) { out += encode_utf8(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Piece> run() {
    std::vector<Piece> pieces;
    size_t pos = 0;
    bool strip_next = false;  // the tag before ended with '-': leading whitespace goes
    while (pos <= src_.size()) {
      const size_t start = next_tag(pos);
      std::string text = src_.substr(pos, start - pos);
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      }
      strip_next = false;
      if (start == src_.size()) {
        add_text(pieces, std::move(text));
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
      if (sign == '-') {
        size_t k = text.size();
        while (k > 0 && is_space(text[k - 1])) --k;
        text.erase(k);
      } else if (kind != '{' && sign != '+') {
        lstrip_block(text, pos);
      }
      add_text(pieces, std::move(text));
      const int line = line_at(start);
      size_t body = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", body);
        if (end == std::string::npos) throw Error("a comment is not closed", line);
        strip_next = end > body && src_[end - 1] == '-';
        pos = end + 2;
        if (!strip_next && !(end > body && src_[end - 1] == '+')) pos = trim_newline(pos);
        continue;
      }
      Piece p;
      p.type = kind == '{' ? Piece::Type::Output : Piece::Type::Statement;
      p.line = line;
      pos = tokenize(body, kind == '{' ? '}' : '%', p.tokens, strip_next);
      pieces.push_back(std::move(p));
    }
    return pieces;
  }

 private:
  // The next "{{", "{%" or "{#" at or after pos, else src_.size().
  size_t next_tag(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  int line_at(size_t pos) {
    for (; counted_ < pos; ++counted_)
      if (src_[counted_] == '\n') ++line_;
    return line_;
  }

  // lstrip_blocks: spaces and tabs between a line's start and a block tag go.
  void lstrip_block(std::string& text, size_t text_pos) const {
    const size_t nl = text.rfind('\n');
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    const bool line_start = nl != std::string::npos || text_pos == 0 || src_[text_pos - 1] == '\n';
    if (!line_start || from == text.size()) return;
    for (size_t k = from; k < text.size(); ++k)
      if (!is_space(text[k])) return;
    text.erase(from);
  }

  // trim_blocks: one newline right after a block tag goes.
  size_t trim_newline(size_t pos) const {
    return pos < src_.size() && src_[pos] == '\n' ? pos + 1 : pos;
  }

  static void add_text(std::vector<Piece>& pieces, std::string text) {
    if (text.empty()) return;
    Piece p;
    p.text = std::move(text);
    pieces.push_back(std::move(p));
  }

  // Tokens from pos up to the tag's end ("}}" or "%}" outside brackets); returns the position
  // after it (and the newline trim_blocks eats).
  size_t tokenize(size_t pos, char close, std::vector<Token>& out, bool& strip_next) {
    std::string open;  // brackets open inside the tag, innermost last
    const int line = line_at(pos);
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) throw Error("a tag is not closed", line);
      const int at = line_at(pos);
      auto closes_at = [&](size_t p) {
        return p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}';
      };
      if (!open.empty() && open.back() != '{' && closes_at(pos))  // "}}" cannot close a ( or [
        throw Error(std::string("'") + open.back() + "' is not closed", at);
      if (open.empty()) {
        if (closes_at(pos)) {
          out.push_back({Token::Type::End, "", at});
          return close == '%' ? trim_newline(pos + 2) : pos + 2;
        }
        if ((src_[pos] == '-' || src_[pos] == '+') && closes_at(pos + 1)) {
          out.push_back({Token::Type::End, "", at});
          strip_next = src_[pos] == '-';
          return pos + 3;
        }
      }
      const char c = src_[pos];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        out.push_back({Token::Type::Name, src_.substr(pos, e - pos), at});
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = number(pos, at, out);
      } else if (c == '\'' || c == '"') {
        pos = string(pos, at, out);
      } else {
        static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                          "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                          "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        const char* op = nullptr;
        for (const char* o : ops)
          if (src_.compare(pos, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        if (!op) throw Error(std::string("unexpected character '") + c + "'", at);
        if (*op == '(' || *op == '[' || *op == '{') open += *op;
        if ((*op == ')' || *op == ']' || *op == '}') && !open.empty()) open.pop_back();
        out.push_back({Token::Type::Op, op, at});
        pos += std::strlen(op);
      }
    }
  }

  size_t number(size_t pos, int line, std::vector<Token>& out) const {
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1])))))
        ++p;
      return p;
    };
    size_t e = digits(pos);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    out.push_back({is_float ? Token::Type::Float : Token::Type::Int, text, line});
    return e;
  }

  // A quoted string, its escapes decoded as Python's unicode-escape does.
  size_t string(size_t pos, int line, std::vector<Token>& out) const {
    const char quote = src_[pos];
    std::string value;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) throw Error("a string is not closed", line);
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) throw Error("a string is not closed", line);
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t code = 0;
          for (int k = 0; k < n; ++k) {
            const int h = p + static_cast<size_t>(k) < src_.size() ? hex_value(src_[p + static_cast<size_t>(k)]) : -1;
            if (h < 0) throw Error(std::string("a truncated \\") + e + " escape in a string", line);
            code = code * 16 + static_cast<uint32_t>(h);
          }
          if (code > 0x10ffff) throw Error("an escape beyond Unicode in a string", line);
          append_utf8(value, code);
          p += static_cast<size_t>(n);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t code = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k, ++p)
              code = code * 8 + static_cast<uint32_t>(src_[p] - '0');
            append_utf8(value, code);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    out.push_back({Token::Type::String, value, line});
    return p + 1;
  }

  std::string src_;
  size_t counted_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<Piece> lex(const std::string& source) { return Lexer(normalize(source)).run(); }

}  // namespace strata::jinja
