#include "generation/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
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
          count(1);
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
          count(1);
        }
        if (at_end()) fail("a character class is not closed");
        ++i_;
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (c == '.') {
        ++i_;
        GrammarElement e;
        e.negated = true;  // outside no range: any code point
        count(1);
        last_start = seq.size();
        seq.push_back(std::move(e));
      } else if (c == '(') {
        ++i_;
        skip_space(true);
        if (++group_depth_ > kMaxGrammarGroupDepth)
          fail(fmt::format("groups nest deeper than {}", kMaxGrammarGroupDepth));
        const int32_t id = helper("group");
        auto alts = parse_alternatives(true);
        --group_depth_;
        g_.rules[static_cast<size_t>(id)] = std::move(alts);
        skip_space(true);
        if (at_end() || s_[i_] != ')') fail("a group is not closed");
        ++i_;
        GrammarElement e;
        e.rule = id;
        count(1);
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
        count(1);
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
    // What the repetition spells out, counted before it is built.
    const size_t copies = static_cast<size_t>(min) + static_cast<size_t>(max < 0 ? 1 : max - min);
    count(copies * (units(item) + 1));
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

  // Elements and ranges an item holds (what copying it costs).
  static size_t units(const GrammarAlternative& item) {
    size_t n = 0;
    for (const auto& e : item) n += 1 + e.ranges.size();
    return n;
  }

  void count(size_t n) {
    elements_ += n;
    if (elements_ > kMaxGrammarElements)
      throw GrammarLimit(fmt::format("grammar line {}: the grammar spells out more than {} elements "
                                     "(a long item repeated many times?)",
                                     line(), kMaxGrammarElements));
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

  // Which rules can match the empty text: a worklist over the alternatives made only of rule
  // references (a chain of 60,000 rules is linear, not 60,000 passes).
  std::vector<bool> nullable_rules() const {
    const size_t n = g_.rules.size();
    std::vector<bool> nullable(n, false);
    std::vector<std::vector<std::pair<size_t, size_t>>> used_in(n);  // rule -> (rule, alternative)
    std::vector<std::vector<size_t>> waiting(n);  // per rule, per alternative: references left
    std::vector<size_t> ready;
    for (size_t r = 0; r < n; ++r) {
      waiting[r].resize(g_.rules[r].size());
      for (size_t a = 0; a < g_.rules[r].size(); ++a) {
        const auto& alt = g_.rules[r][a];
        if (!std::all_of(alt.begin(), alt.end(), [](const GrammarElement& e) { return e.rule >= 0; }))
          continue;  // a code point set: never empty
        waiting[r][a] = alt.size();
        for (const auto& e : alt) used_in[static_cast<size_t>(e.rule)].emplace_back(r, a);
        if (alt.empty() && !nullable[r]) {
          nullable[r] = true;
          ready.push_back(r);
        }
      }
    }
    while (!ready.empty()) {
      const size_t s = ready.back();
      ready.pop_back();
      for (const auto& [r, a] : used_in[s])
        if (--waiting[r][a] == 0 && !nullable[r]) {
          nullable[r] = true;
          ready.push_back(r);
        }
    }
    return nullable;
  }

  // A rule that can reach itself without consuming a character would make matching loop. A
  // depth-first walk over the references each alternative starts with (past nullable ones),
  // with its own stack: no recursion, whatever the grammar's length.
  void check_left_recursion() const {
    const size_t n = g_.rules.size();
    const std::vector<bool> nullable = nullable_rules();
    std::vector<std::vector<size_t>> starts(n);  // rules an alternative of r may begin with
    for (size_t r = 0; r < n; ++r)
      for (const auto& alt : g_.rules[r])
        for (const auto& e : alt) {
          if (e.rule < 0) break;
          starts[r].push_back(static_cast<size_t>(e.rule));
          if (!nullable[static_cast<size_t>(e.rule)]) break;
        }
    std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<size_t, size_t>> path;  // (rule, next edge)
    for (size_t root = 0; root < n; ++root) {
      if (mark[root] != 0) continue;
      mark[root] = 1;
      path.emplace_back(root, 0);
      while (!path.empty()) {
        auto& [r, edge] = path.back();
        if (edge == starts[r].size()) {
          mark[r] = 2;
          path.pop_back();
          continue;
        }
        const size_t s = starts[r][edge++];
        if (mark[s] == 1) throw Error(fmt::format("the grammar is left-recursive at rule '{}'", g_.names[s]));
        if (mark[s] == 0) {
          mark[s] = 1;
          path.emplace_back(s, 0);
        }
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
  Grammar g_;
  std::vector<bool> defined_;
  std::map<std::string, int32_t> ids_;
  int group_depth_ = 0;
  size_t elements_ = 0;
};

}  // namespace

Grammar Grammar::parse(const std::string& text) {
  Grammar g = GbnfParser(text).run();
  const GrammarState start(g);  // its limits are checked here, not when a request is admitted
  return g;
}

uint64_t Grammar::memory_bytes() const {
  uint64_t n = rules.capacity() * sizeof(rules[0]) + names.capacity() * sizeof(std::string);
  for (const auto& rule : rules) {
    n += rule.capacity() * sizeof(GrammarAlternative);
    for (const auto& alt : rule) {
      n += alt.capacity() * sizeof(GrammarElement);
      for (const auto& e : alt) n += e.ranges.capacity() * sizeof(e.ranges[0]);
    }
  }
  for (const auto& name : names) n += name.capacity();
  return n;
}

namespace {

[[noreturn]] void too_many_paths() {
  throw GrammarLimit(fmt::format("the grammar follows more than {} paths at once "
                                 "(an enum or alternatives too many, or too ambiguous)",
                                 kMaxGrammarStacks));
}

}  // namespace

GrammarState::GrammarState(const Grammar& g) : g_(&g) {
  ExpandCount count;
  for (size_t a = 0; a < g.rules[0].size(); ++a)
    expand({{0, static_cast<int32_t>(a), 0}}, stacks_, count);
  normalize(stacks_);
  if (stacks_.size() > kMaxGrammarStacks) too_many_paths();
}

void GrammarState::expand(GrammarStack s, std::vector<GrammarStack>& out, ExpandCount& count) const {
  // Bounds on the work of one step, duplicates included (they are removed later): a grammar
  // whose alternatives multiply fails here, before it has made millions of stacks.
  std::vector<GrammarStack> work;
  work.push_back(std::move(s));
  while (!work.empty()) {
    GrammarStack t = std::move(work.back());
    work.pop_back();
    if (++count.visited > 16 * kMaxGrammarStacks) too_many_paths();
    bool waits = true;  // t ends at a code point set (or is done)
    while (!t.empty()) {
      const GrammarPosition& top = t.back();
      const auto& alt = g_->rules[static_cast<size_t>(top.rule)][static_cast<size_t>(top.alternative)];
      if (top.element == static_cast<int32_t>(alt.size())) {
        t.pop_back();
        continue;
      }
      const GrammarElement& e = alt[static_cast<size_t>(top.element)];
      if (e.rule < 0) break;  // a code point set: the stack waits here
      // A reference: continue after it once the rule is done (a tail call keeps nothing).
      t.back().element++;
      if (t.back().element == static_cast<int32_t>(alt.size())) t.pop_back();
      const auto& alts = g_->rules[static_cast<size_t>(e.rule)];
      for (size_t a = 0; a < alts.size(); ++a) {
        GrammarStack u = t;
        u.push_back({e.rule, static_cast<int32_t>(a), 0});
        work.push_back(std::move(u));
      }
      waits = false;
      break;
    }
    if (!waits) continue;
    count.positions += t.size();
    if (count.positions > kMaxGrammarPositions)
      throw GrammarLimit(fmt::format("the grammar's paths hold more than {} positions (nested too deeply)",
                                     kMaxGrammarPositions));
    out.push_back(std::move(t));
    if (out.size() > 4 * kMaxGrammarStacks) too_many_paths();
  }
}

void GrammarState::normalize(std::vector<GrammarStack>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

bool GrammarState::advance(uint32_t cp) {
  std::vector<GrammarStack> next;
  ExpandCount count;
  for (const auto& s : stacks_) {
    if (s.empty()) continue;
    const GrammarPosition& top = s.back();
    const auto& e = g_->rules[static_cast<size_t>(top.rule)][static_cast<size_t>(top.alternative)]
                             [static_cast<size_t>(top.element)];
    if (!e.matches(cp)) continue;
    GrammarStack t = s;
    t.back().element++;
    expand(std::move(t), next, count);
  }
  if (next.empty()) return false;
  normalize(next);
  // A grammar ambiguous enough to follow this many paths at once fails the request (loudly)
  // rather than let its matching grow without bound or end the text in silence.
  if (next.size() > kMaxGrammarStacks) too_many_paths();
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
