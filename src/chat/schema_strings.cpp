#include "chat/schema_strings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "model/unicode.h"

namespace strata {

namespace {

using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // code points, inclusive, sorted
constexpr uint32_t kLastCodePoint = 0x10FFFF;
constexpr int kMaxPatternDepth = 64;
constexpr int kMaxPatternCount = 1000;  // what GBNF's {m,n} takes

[[noreturn]] void refuse_pattern(const std::string& why) {
  throw SchemaError("pattern", fmt::format("the JSON schema's 'pattern' {}", why));
}

CodeRanges sorted_ranges(CodeRanges r) {
  std::sort(r.begin(), r.end());
  CodeRanges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.emplace_back(lo, hi);
  }
  return out;
}

CodeRanges outside(const CodeRanges& set) {
  CodeRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : sorted_ranges(set)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kLastCodePoint) out.emplace_back(next, kLastCodePoint);
  return out;
}

CodeRanges both_ranges(const CodeRanges& a, const CodeRanges& b) {
  CodeRanges out;
  for (const auto& [alo, ahi] : sorted_ranges(a))
    for (const auto& [blo, bhi] : sorted_ranges(b))
      if (std::max(alo, blo) <= std::min(ahi, bhi)) out.emplace_back(std::max(alo, blo), std::min(ahi, bhi));
  return sorted_ranges(out);
}

bool in_ranges(const CodeRanges& set, uint32_t cp) {
  return std::any_of(set.begin(), set.end(), [&](const auto& r) { return r.first <= cp && cp <= r.second; });
}

// A GBNF literal of UTF-8 text: quotes, backslashes and control bytes escaped.
std::string gbnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02X}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string string_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "(" : " | ") + a;
  return out + ")";
}

// One character of `set` as it is written inside a JSON string: plain where JSON allows it,
// the short escape for " \ and the control characters that have one; empty if none can be.
std::string json_char(const CodeRanges& set) {
  static const CodeRanges escaped = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};
  const CodeRanges plain = both_ranges(set, outside(escaped));
  std::vector<std::string> alts;
  if (plain.size() == 1 && plain[0].first == plain[0].second) {
    alts.push_back(gbnf_literal(encode_utf8(plain[0].first)));
  } else if (!plain.empty()) {
    std::string cls = "[";
    for (const auto& [lo, hi] : plain)
      cls += lo == hi ? fmt::format("\\U{:08X}", lo) : fmt::format("\\U{:08X}-\\U{:08X}", lo, hi);
    alts.push_back(cls + "]");
  }
  static const std::pair<uint32_t, const char*> kShort[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\b', "\\b"}, {'\f', "\\f"}};
  for (const auto& [cp, esc] : kShort)
    if (in_ranges(set, cp)) alts.push_back(gbnf_literal(esc));
  return alts.empty() ? "" : string_alternatives(alts);
}

// Class escapes, ASCII only: Python's re (python3-jsonschema's) reads \d \w \s over Unicode and
// ECMA-262 over ASCII (\s: Unicode spaces), so only what both take is written.
const CodeRanges kDigits = {{'0', '9'}};
const CodeRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodeRanges kSpace = {{'\t', '\r'}, {' ', ' '}};
const CodeRanges kAsciiPrintable = {{' ', '~'}};

class PatternParser {
 public:
  explicit PatternParser(const std::string& pattern) {
    for (const Utf8Char& c : split_utf8(pattern)) c_.push_back(c.codepoint);
  }

  std::string run() {
    size_t first = 0, last = c_.size();
    const bool anchored_start = !c_.empty() && c_[0] == '^';
    if (anchored_start) first = 1;
    size_t backslashes = 0;
    while (last >= 2 + backslashes && c_[last - 2 - backslashes] == '\\') ++backslashes;
    const bool anchored_end = last > first && c_[last - 1] == '$' && backslashes % 2 == 0;
    if (anchored_end) --last;
    i_ = first, end_ = last;
    // A top-level alternative is a search of its own: ^ binds the first, $ the last.
    std::vector<std::string> branches{sequence()};
    while (next_is('|')) {
      ++i_;
      branches.push_back(sequence());
    }
    if (i_ != end_) refuse_pattern("has a ')' that closes no group");
    for (size_t b = 0; b < branches.size(); ++b) {
      std::vector<std::string> parts;
      if (!(b == 0 && anchored_start)) parts.emplace_back("char*");
      if (!branches[b].empty()) parts.push_back(branches[b]);
      if (!(b + 1 == branches.size() && anchored_end)) parts.emplace_back("char*");
      branches[b] = parts.empty() ? "\"\"" : fmt::format("{}", fmt::join(parts, " "));
    }
    return "\"\\\"\" " + string_alternatives(branches) + " \"\\\"\"";
  }

 private:
  bool at_end() const { return i_ >= end_; }
  bool next_is(uint32_t c) const { return !at_end() && c_[i_] == c; }

  std::string alternation() {
    std::vector<std::string> alts{sequence()};
    while (next_is('|')) {
      ++i_;
      alts.push_back(sequence());
    }
    for (auto& a : alts)
      if (a.empty()) a = "\"\"";
    return alts.size() == 1 && alts[0] == "\"\"" ? "" : string_alternatives(alts);
  }

  std::string sequence() {
    std::string out;
    while (!at_end() && c_[i_] != '|' && c_[i_] != ')') {
      std::string item = quantified(atom());
      if (!item.empty()) out += (out.empty() ? "" : " ") + item;
    }
    return out;
  }

  int count() {
    size_t digits = 0;
    int64_t v = 0;
    while (!at_end() && c_[i_] >= '0' && c_[i_] <= '9') {
      v = std::min<int64_t>(v * 10 + (c_[i_++] - '0'), kMaxPatternCount + 1);
      ++digits;
    }
    if (digits == 0) refuse_pattern("has a '{' that is not a count such as {2} or {1,3}");
    if (v > kMaxPatternCount) refuse_pattern(fmt::format("repeats something more than {} times", kMaxPatternCount));
    return static_cast<int>(v);
  }

  std::string quantified(const std::string& item) {
    if (at_end()) return item;
    std::string q;
    const uint32_t c = c_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, static_cast<char>(c));
      ++i_;
    } else if (c == '{') {
      ++i_;
      const int min = count();
      int max = min;
      if (next_is(',')) {
        ++i_;
        max = next_is('}') ? -1 : count();
      }
      if (!next_is('}')) refuse_pattern("has a '{' that is not a count such as {2} or {1,3}");
      ++i_;
      if (max >= 0 && max < min) refuse_pattern("has a count whose maximum is below its minimum");
      q = max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    } else {
      return item;
    }
    if (next_is('?')) ++i_;  // lazy: the same strings
    if (!at_end() && (c_[i_] == '*' || c_[i_] == '+' || c_[i_] == '?' || c_[i_] == '{'))
      refuse_pattern("repeats a repetition (possessive or doubled quantifiers are not enforced)");
    if (item.empty()) return "";
    return (item.find(' ') == std::string::npos ? item : "(" + item + ")") + q;
  }

  std::string atom() {
    const uint32_t c = c_[i_++];
    switch (c) {
      case '(': return group();
      case '[': return written(char_class());
      // ECMA-262's . leaves out line terminators, Python's only \n: neither is written.
      case '.': return written(outside({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      case '\\': return written(escape(false));
      case '^': case '$': refuse_pattern("has an anchor inside it (only a leading ^ and a trailing $ are enforced)");
      case '*': case '+': case '?': case '{': refuse_pattern(fmt::format("has a '{}' that repeats nothing", static_cast<char>(c)));
      default: return written({{c, c}});
    }
  }

  static std::string written(const CodeRanges& set) {
    const std::string g = json_char(set);
    if (g.empty()) refuse_pattern("has a character no JSON string strata writes can hold");
    return g;
  }

  std::string group() {
    if (next_is('?')) {
      ++i_;
      const uint32_t kind = at_end() ? 0 : c_[i_];
      if (kind == ':') {
        ++i_;
      } else if ((kind == '<' || kind == 'P') && !(i_ + 1 < end_ && (c_[i_ + 1] == '=' || c_[i_ + 1] == '!'))) {
        while (!at_end() && c_[i_] != '>') ++i_;  // a named group: its name
        if (at_end()) refuse_pattern("has a group name that is not closed");
        ++i_;
      } else {
        refuse_pattern("has a lookaround or group flag ('(?'), which is not enforced");
      }
    }
    if (++depth_ > kMaxPatternDepth) refuse_pattern(fmt::format("nests groups deeper than {}", kMaxPatternDepth));
    const std::string inner = alternation();
    if (!next_is(')')) refuse_pattern("has a group that is not closed");
    ++i_;
    --depth_;
    return inner.empty() ? "" : "(" + inner + ")";
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end()) refuse_pattern("has a truncated hex escape");
      const uint32_t d = c_[i_++];
      const int n = d >= '0' && d <= '9' ? d - '0' : d >= 'a' && d <= 'f' ? d - 'a' + 10 : d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
      if (n < 0) refuse_pattern("has a truncated hex escape");
      v = v * 16 + n;
    }
    return v;
  }

  // After a backslash: a class escape's set or one character; `class_escape` is set when a set.
  CodeRanges escape(bool in_class, bool* class_escape = nullptr) {
    if (at_end()) refuse_pattern("ends in a backslash");
    const uint32_t e = c_[i_++];
    const auto set = [&](const CodeRanges& r) {
      if (class_escape) *class_escape = true;
      return r;
    };
    switch (e) {
      case 'd': return set(kDigits);
      case 'w': return set(kWord);
      case 's': return set(kSpace);
      case 'D': return set(both_ranges(kAsciiPrintable, outside(kDigits)));
      case 'W': return set(both_ranges(kAsciiPrintable, outside(kWord)));
      case 'S': return set(both_ranges(kAsciiPrintable, outside(kSpace)));
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { const uint32_t v = hex(4); return {{v, v}}; }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        refuse_pattern("has a word boundary ('\\b'), which is not enforced");
      case 'B': refuse_pattern("has a word boundary ('\\B'), which is not enforced");
      case 'p': case 'P': refuse_pattern("has a Unicode property class ('\\p'), which is not enforced");
      default: break;
    }
    if (e >= '1' && e <= '9') refuse_pattern("has a backreference, which is not enforced");
    if (e < 0x80 && std::isalnum(static_cast<int>(e)))
      refuse_pattern(fmt::format("has an escape '\\{}' strata does not know", static_cast<char>(e)));
    return {{e, e}};
  }

  CodeRanges char_class() {
    const bool negated = next_is('^');
    if (negated) ++i_;
    if (next_is(']')) refuse_pattern("has a class that starts with ']' (read differently by different engines)");
    CodeRanges set;
    bool has_class_escape = false;
    while (true) {
      if (at_end()) refuse_pattern("has a character class that is not closed");
      if (c_[i_] == ']') {
        ++i_;
        break;
      }
      if (c_[i_] == '[' && i_ + 1 < end_ && c_[i_ + 1] == ':')
        refuse_pattern("has a POSIX class ('[:'), which is not enforced");
      bool escaped_set = false;
      const CodeRanges lo = class_atom(escaped_set);
      if (!escaped_set && next_is('-') && i_ + 1 < end_ && c_[i_ + 1] != ']') {
        ++i_;
        bool hi_set = false;
        const CodeRanges hi = class_atom(hi_set);
        if (hi_set) refuse_pattern("has a range that ends in a class escape");
        if (hi[0].first < lo[0].first) refuse_pattern("has a range that ends below its start");
        set.emplace_back(lo[0].first, hi[0].first);
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
        has_class_escape |= escaped_set;
      }
    }
    if (!negated) return sorted_ranges(set);
    // [^\d] means different things to Python and ECMA-262 outside ASCII: ASCII only there.
    const CodeRanges out = outside(set);
    return has_class_escape ? both_ranges(out, kAsciiPrintable) : out;
  }

  CodeRanges class_atom(bool& class_escape) {
    const uint32_t c = c_[i_++];
    if (c == '\\') return escape(true, &class_escape);
    return {{c, c}};
  }

  std::vector<uint32_t> c_;
  size_t i_ = 0, end_ = 0;
  int depth_ = 0;
};

// Names that share a prefix: the key is one of them at a node only where a name ends there.
struct KeyTrie {
  bool ends = false;
  std::map<uint32_t, KeyTrie> next;
};

// Strings over plain JSON characters that do not end on a name: stop where no name ends, leave
// the trie by a character no name continues with (then anything), or follow a name's character.
std::string not_in_trie(const KeyTrie& node) {
  static const std::string kPlain = "[^\"\\\\\\x7F\\x00-\\x1F]";
  std::vector<std::string> alts;
  if (!node.ends) alts.push_back("\"\"");
  std::string leave = "[^\"\\\\\\x7F\\x00-\\x1F";
  for (const auto& [cp, child] : node.next) leave += fmt::format("\\U{:08X}", cp);
  alts.push_back(leave + "] " + kPlain + "*");
  for (const auto& [cp, child] : node.next)
    if (cp >= 0x20 && cp != '"' && cp != '\\' && cp != 0x7F)  // else never written plainly
      alts.push_back(gbnf_literal(encode_utf8(cp)) + " " + not_in_trie(child));
  return string_alternatives(alts);
}

constexpr const char* kDate =
    "[1-9] [0-9]{3} \"-\" ((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" "
    "(\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"04\" | \"06\" | \"09\" | \"11\") \"-\" "
    "(\"0\" [1-9] | [12] [0-9] | \"30\") | \"02\" \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))";
constexpr const char* kTime =
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
constexpr const char* kOctet = "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9])";

}  // namespace

std::string pattern_string_gbnf(const std::string& pattern) { return PatternParser(pattern).run(); }

std::optional<std::string> format_string_gbnf(const std::string& format) {
  std::string body;
  if (format == "date") body = kDate;
  else if (format == "time") body = kTime;
  else if (format == "date-time") body = fmt::format("{} \"T\" {}", kDate, kTime);
  else if (format == "uuid")
    body = "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}";
  else if (format == "ipv4") body = fmt::format("{0} \".\" {0} \".\" {0} \".\" {0}", kOctet);
  else if (format == "email")
    body = "[a-zA-Z0-9_%+-]{1,32} (\".\" [a-zA-Z0-9_%+-]{1,32}){0,3} \"@\" [a-zA-Z0-9-]{1,32} (\".\" [a-zA-Z0-9-]{1,32}){1,3}";
  else return std::nullopt;
  return "\"\\\"\" " + body + " \"\\\"\"";
}

std::string key_not_in_gbnf(const std::vector<std::string>& names) {
  KeyTrie root;
  for (const auto& name : names) {
    KeyTrie* node = &root;
    for (const Utf8Char& c : split_utf8(name)) node = &node->next[c.codepoint];
    node->ends = true;
  }
  return "\"\\\"\" " + not_in_trie(root) + " \"\\\"\"";
}

}  // namespace strata
