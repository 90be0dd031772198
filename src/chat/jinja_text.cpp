// Python's str operations as templates call them (chat/jinja_builtin_support.h).
#include "chat/jinja_builtin_support.h"

namespace strata::jinja::builtin {

// Python's string whitespace (ASCII and the common Unicode spaces).
bool py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = code_points(s);
  std::u32string set;
  const bool by_set = chars && !chars->is_none() && !chars->is_undefined();
  if (by_set) {
    if (!chars->is_string()) type_error("strip arg must be None or str");
    set = code_points(chars->as_string());
  }
  auto drop = [&](char32_t c) { return by_set ? set.find(c) != std::u32string::npos : py_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return utf8(u.substr(b, e - b));
}

List split(const std::string& s, const Value* sep, const Value* maxsplit_v) {
  int64_t maxsplit = maxsplit_v && is_int_like(*maxsplit_v) ? int_of(*maxsplit_v) : -1;
  List out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty pieces
    const std::u32string u = code_points(s);
    size_t i = 0;
    while (true) {
      while (i < u.size() && py_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit == 0) {
        size_t e = u.size();
        while (e > i && py_space(u[e - 1])) --e;
        out.emplace_back(utf8(u.substr(i, e - i)));
        break;
      }
      check_items(out.size() + 1);
      size_t j = i;
      while (j < u.size() && !py_space(u[j])) ++j;
      out.emplace_back(utf8(u.substr(i, j - i)));
      --maxsplit;
      i = j;
    }
    return out;
  }
  if (!sep->is_string()) type_error("must be str or None, not " + sep->type_name());
  const std::string& d = sep->as_string();
  if (d.empty()) throw Error("empty separator");
  size_t from = 0;
  while (maxsplit != 0) {
    const size_t at = s.find(d, from);
    if (at == std::string::npos) break;
    check_items(out.size() + 1);
    out.emplace_back(s.substr(from, at - from));
    from = at + d.size();
    --maxsplit;
  }
  out.emplace_back(s.substr(from));
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between every character
    const std::u32string u = code_points(s);
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || static_cast<int64_t>(i) < count) out += with;
      if (i < u.size()) out += utf8(std::u32string(1, u[i]));
      check_text(out.size());
    }
    return out;
  }
  size_t from = 0;
  while (count != 0) {
    const size_t at = s.find(old, from);
    if (at == std::string::npos) break;
    out += s.substr(from, at - from) + with;
    check_text(out.size());
    from = at + old.size();
    --count;
  }
  return out + s.substr(from);
}


std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = code_points(s);
  for (auto& c : u) c = f(c);
  return utf8(u);
}

std::string capitalize(const std::string& s) {
  std::u32string u = code_points(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return utf8(u);
}

std::string title(const std::string& s) {
  std::u32string u = code_points(s);
  bool prev_cased = false;
  for (auto& c : u) {
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = is_alpha(c);
  }
  return utf8(u);
}

bool starts_or_ends(const std::string& s, const Value& arg, bool start) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) type_error("startswith/endswith takes a str or a tuple of str");
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.kind() == K::List) {
    for (const auto& p : arg.as_list())
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

}  // namespace strata::jinja::builtin
