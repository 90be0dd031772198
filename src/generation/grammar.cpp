#include "generation/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "core/error.h"
#include "model/unicode.h"

namespace strata {

bool GrammarElement::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
  return in != negated;
}

bool GrammarElement::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range.
  uint32_t cp = lo;
  while (cp <= hi) {
    bool covered = false;
    for (const auto& [a, b] : ranges)
      if (cp >= a && cp <= b) {
        if (b == UINT32_MAX) return false;
        cp = b + 1;
        covered = true;
      }
    if (!covered) return true;
  }
  return false;
}

namespace {

constexpr int kMaxRepetition = 1000;  // {m,n} bounds; larger is an error, not a huge grammar

class GbnfParser {
 public:
  explicit GbnfParser(const std::string& text) : s_(text) {}

  Grammar run() {
    rule_id("root");
    while (true) {
      skip_space(true);
      if (at_end()) break;
      const std::string name = parse_name();
      skip_space(false);
      if (s_.compare(i_, 3, "::=") != 0) fail("expected '::=' after '" + name + "'");
      i_ += 3;
      const int32_t id = rule_id(name);
      if (defined_[static_cast<size_t>(id)]) fail("rule '" + name + "' is defined twice");
      defined_[static_cast<size_t>(id)] = true;
      skip_space(true);
      g_.rules[static_cast<size_t>(id)] = parse_alternatives(false);
      skip_space(false);
      if (!at_end() && s_[i_] != '\n') fail("unexpected '" + std::string(1, s_[i_]) + "'");
    }
    if (!defined_[0]) throw Error("the grammar has no 'root' rule");
    for (size_t r = 0; r < g_.rules.size(); ++r)
      if (!defined_[r]) throw Error(fmt::format("the grammar uses rule '{}' but never defines it", g_.names[r]));
    check_left_recursion();
    return std::move(g_);
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  int line() const { return 1 + static_cast<int>(std::count(s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(std::min(i_, s_.size())), '\n')); }
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("grammar line {}: {}", line(), what)); }

  // Spaces, tabs and # comments; newlines too where `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '#') {
        while (!at_end() && s_[i_] != '\n') ++i_;
      } else {
        return;
      }
    }
  }

  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

  std::string parse_name() {
    const size_t b = i_;
    while (!at_end() && name_char(s_[i_])) ++i_;
    if (b == i_) fail("expected a rule name");
    return s_.substr(b, i_ - b);
  }

  int32_t rule_id(const std::string& name) {
    const auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return new_rule(name, false);
  }

  int32_t new_rule(const std::string& name, bool defined) {
    const auto id = static_cast<int32_t>(g_.rules.size());
    g_.rules.emplace_back();
    g_.names.push_back(name);
    defined_.push_back(defined);
    ids_[name] = id;
    return id;
  }

  int32_t helper(const std::string& base) { return new_rule(fmt::format("{}_{}", base, g_.rules.size()), true); }

  std::vector<GrammarAlternative> parse_alternatives(bool nested) {
    std::vector<GrammarAlternative> alts;
    alts.push_back(parse_sequence(nested));
    while (!at_end() && s_[i_] == '|') {
      ++i_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of the grammar");
    if (s_[i_] == '\\') {
      ++i_;
      if (at_end()) fail("an escape at the end of the grammar");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<unsigned char>(e);
        default: fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const auto chars = split_utf8(std::string_view(s_).substr(i_, 4));
    i_ += chars.front().length;
    return chars.front().codepoint;
  }

  uint32_t parse_hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) fail("a truncated hex escape");
      const char c = s_[i_++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
    }
    return v;
  }

  GrammarAlternative parse_sequence(bool nested) {
    GrammarAlternative seq;
    size_t last_start = SIZE_MAX;  // where the last item (a literal's elements, a class, ...) begins
    while (true) {
      skip_space(nested);
      if (at_end()) break;
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        last_start = seq.size();
        while (!at_end() && s_[i_] != '"') {
          const uint32_t cp = parse_char();
          GrammarElement e;
          e.ranges.emplace_back(cp, cp);
          seq.push_back(std::move(e));
        }
        if (at_end()) fail("a literal is not closed");
        ++i_;
      } else if (c == '[') {
        ++i_;
        GrammarElement e;
        if (!at_end() && s_[i_] == '^') {
          e.negated = true;
          ++i_;
        }
        while (!at_end() && s_[i_] != ']') {
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
            ++i_;
            hi = parse_char();
          }
          if (hi < lo) fail("a character range ends below its start");
          e.ranges.emplace_back(lo, hi);
        }
        if (at_end()) fail("a character class is not closed");
        ++i_;
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (c == '.') {
        ++i_;
        GrammarElement e;
        e.negated = true;  // outside no range: any code point
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (c == '(') {
        ++i_;
        skip_space(true);
        const int32_t id = helper("group");
        auto alts = parse_alternatives(true);
        g_.rules[static_cast<size_t>(id)] = std::move(alts);
        skip_space(true);
        if (at_end() || s_[i_] != ')') fail("a group is not closed");
        ++i_;
        GrammarElement e;
        e.rule = id;
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (name_char(c)) {
        const size_t save = i_;
        const std::string name = parse_name();
        size_t k = i_;
        while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
        if (s_.compare(k, 3, "::=") == 0) {  // the next rule starts (on this line: a syntax error)
          i_ = save;
          if (!nested) break;
          fail("a rule definition inside a group");
        }
        GrammarElement e;
        e.rule = rule_id(name);
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == SIZE_MAX) fail(fmt::format("'{}' repeats nothing", c));
        repeat(seq, last_start);
      } else {
        break;  // '|', ')', a newline ending the rule, or an error the caller names
      }
    }
    return seq;
  }

  // Applies the repetition at i_ to seq[from:].
  void repeat(GrammarAlternative& seq, size_t& from) {
    GrammarAlternative item(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end());
    seq.resize(from);
    int min = 0, max = -1;  // -1: unbounded
    const char c = s_[i_++];
    if (c == '+') min = 1;
    if (c == '?') max = 1;
    if (c == '{') {
      skip_space(false);
      min = parse_count();
      max = min;
      skip_space(false);
      if (!at_end() && s_[i_] == ',') {
        ++i_;
        skip_space(false);
        max = !at_end() && std::isdigit(static_cast<unsigned char>(s_[i_])) ? parse_count() : -1;
        skip_space(false);
      }
      if (at_end() || s_[i_] != '}') fail("expected '}' closing a repetition");
      ++i_;
      if (max >= 0 && max < min) fail("a repetition's maximum is below its minimum");
    }
    for (int k = 0; k < min; ++k) seq.insert(seq.end(), item.begin(), item.end());
    GrammarElement tail;
    if (max < 0) {  // R ::= item R | (nothing)
      tail.rule = helper("star");
      GrammarAlternative again = item;
      GrammarElement self;
      self.rule = tail.rule;
      again.push_back(self);
      g_.rules[static_cast<size_t>(tail.rule)] = {again, {}};
    } else if (max > min) {  // R_k ::= item R_{k-1} | (nothing), k = max - min
      int32_t inner = -1;
      for (int k = 0; k < max - min; ++k) {
        const int32_t id = helper("opt");
        GrammarAlternative one = item;
        if (inner >= 0) {
          GrammarElement e;
          e.rule = inner;
          one.push_back(e);
        }
        g_.rules[static_cast<size_t>(id)] = {one, {}};
        inner = id;
      }
      tail.rule = inner;
    }
    if (tail.rule >= 0) seq.push_back(tail);
    from = seq.size() - (tail.rule >= 0 ? 1 : item.size());
  }

  int parse_count() {
    int v = 0;
    const size_t b = i_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxRepetition) fail(fmt::format("a repetition count above {}", kMaxRepetition));
    }
    if (b == i_) fail("expected a repetition count");
    return v;
  }

  // A rule that can reach itself without consuming a character would make matching loop.
  void check_left_recursion() const {
    const size_t n = g_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : g_.rules[r]) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const GrammarElement& e) {
            return e.rule >= 0 && nullable[static_cast<size_t>(e.rule)];
          });
          if (all) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done
    std::function<void(size_t)> visit = [&](size_t r) {
      mark[r] = 1;
      for (const auto& alt : g_.rules[r])
        for (const auto& e : alt) {
          if (e.rule < 0) break;
          const auto s = static_cast<size_t>(e.rule);
          if (mark[s] == 1) throw Error(fmt::format("the grammar is left-recursive at rule '{}'", g_.names[s]));
          if (mark[s] == 0) visit(s);
          if (!nullable[s]) break;
        }
      mark[r] = 2;
    };
    for (size_t r = 0; r < n; ++r)
      if (mark[r] == 0) visit(r);
  }

  const std::string& s_;
  size_t i_ = 0;
  Grammar g_;
  std::vector<bool> defined_;
  std::map<std::string, int32_t> ids_;
};

}  // namespace

Grammar Grammar::parse(const std::string& text) { return GbnfParser(text).run(); }

constexpr size_t kMaxStacks = 4096;

GrammarState::GrammarState(const Grammar& g) : g_(&g) {
  for (size_t a = 0; a < g.rules[0].size(); ++a)
    expand({{0, static_cast<int32_t>(a), 0}}, stacks_, 0);
  normalize(stacks_);
}

void GrammarState::expand(GrammarStack s, std::vector<GrammarStack>& out, int depth) const {
  if (depth > 10000) throw Error("the grammar nests too deeply");
  while (!s.empty()) {
    const GrammarPosition& top = s.back();
    const auto& alt = g_->rules[static_cast<size_t>(top.rule)][static_cast<size_t>(top.alternative)];
    if (top.element == static_cast<int32_t>(alt.size())) {
      s.pop_back();
      continue;
    }
    const GrammarElement& e = alt[static_cast<size_t>(top.element)];
    if (e.rule < 0) break;  // a code point set: the stack waits here
    // A reference: continue after it once the rule is done (a tail call keeps nothing).
    s.back().element++;
    if (s.back().element == static_cast<int32_t>(alt.size())) s.pop_back();
    const auto& alts = g_->rules[static_cast<size_t>(e.rule)];
    for (size_t a = 0; a < alts.size(); ++a) {
      GrammarStack t = s;
      t.push_back({e.rule, static_cast<int32_t>(a), 0});
      expand(std::move(t), out, depth + 1);
    }
    return;
  }
  out.push_back(std::move(s));
}

void GrammarState::normalize(std::vector<GrammarStack>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

bool GrammarState::advance(uint32_t cp) {
  std::vector<GrammarStack> next;
  for (const auto& s : stacks_) {
    if (s.empty()) continue;
    const GrammarPosition& top = s.back();
    const auto& e = g_->rules[static_cast<size_t>(top.rule)][static_cast<size_t>(top.alternative)]
                             [static_cast<size_t>(top.element)];
    if (!e.matches(cp)) continue;
    GrammarStack t = s;
    t.back().element++;
    expand(std::move(t), next, 0);
  }
  if (next.empty()) return false;
  normalize(next);
  // A grammar ambiguous enough to follow this many paths at once is cut off here (the text
  // ends) rather than let one request's matching grow without bound.
  if (next.size() > kMaxStacks) return false;
  stacks_ = std::move(next);
  return true;
}

bool GrammarState::could_take(uint32_t lo, uint32_t hi) const {
  for (const auto& s : stacks_) {
    if (s.empty()) continue;
    const GrammarPosition& top = s.back();
    if (g_->rules[static_cast<size_t>(top.rule)][static_cast<size_t>(top.alternative)]
                 [static_cast<size_t>(top.element)]
                     .matches_any(lo, hi))
      return true;
  }
  return false;
}

bool GrammarState::accepting() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const GrammarStack& s) { return s.empty(); });
}

std::string json_object_grammar() {
  return R"(root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";
}

}  // namespace strata
