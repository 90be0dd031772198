#include "chat/schema_numbers.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

namespace strata {

namespace {

// Bounds past this are refused rather than rounded: a double holds every integer up to 2^53
// exactly, and an int64 up to 9.22e18.
constexpr double kLargestBound = 9e18;

std::string spaced(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string number_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "(" : " | ") + a;
  return out + ")";
}

std::string digit_class(char lo, char hi) {
  return lo == hi ? fmt::format("\"{}\"", lo) : fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

// The digit strings from a to b, both of one length (a <= b): a shared prefix, then the first
// digit that differs splits the range into a's tail up to 9s, whole digits between, and 0s up
// to b's tail.
std::string same_length(const std::string& a, const std::string& b) {
  size_t p = 0;
  while (p < a.size() && a[p] == b[p]) ++p;
  const std::string prefix = p == 0 ? "" : "\"" + a.substr(0, p) + "\"";
  if (p == a.size()) return prefix;
  const size_t rest = a.size() - p - 1;
  const std::string a_tail = a.substr(p + 1), b_tail = b.substr(p + 1);
  const bool a_from_zeros = a_tail.find_first_not_of('0') == std::string::npos;
  const bool b_to_nines = b_tail.find_first_not_of('9') == std::string::npos;
  const char middle_lo = a_from_zeros ? a[p] : static_cast<char>(a[p] + 1);
  const char middle_hi = b_to_nines ? b[p] : static_cast<char>(b[p] - 1);
  std::vector<std::string> alts;
  if (!a_from_zeros)
    alts.push_back(spaced(digit_class(a[p], a[p]), same_length(a_tail, std::string(rest, '9'))));
  if (middle_lo <= middle_hi) alts.push_back(spaced(digit_class(middle_lo, middle_hi), any_digits(rest)));
  if (!b_to_nines)
    alts.push_back(spaced(digit_class(b[p], b[p]), same_length(std::string(rest, '0'), b_tail)));
  return spaced(prefix, number_alternatives(alts));
}

size_t digit_count(uint64_t v) { return std::to_string(v).size(); }

uint64_t power_of_ten(size_t n) {
  uint64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

// Magnitudes from a to b (a <= b), one alternative per number of digits.
std::string magnitude_range(uint64_t a, uint64_t b) {
  std::vector<std::string> alts;
  for (size_t len = digit_count(a); len <= digit_count(b); ++len) {
    const uint64_t lo = len == digit_count(a) ? a : power_of_ten(len - 1);
    const uint64_t hi = len == digit_count(b) ? b : power_of_ten(len) - 1;
    alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  return number_alternatives(alts);
}

uint64_t negated_magnitude(int64_t negative) { return static_cast<uint64_t>(-(negative + 1)) + 1; }

bool bound_usable(const std::optional<double>& v) {
  return !v || (std::isfinite(*v) && std::fabs(*v) <= kLargestBound);
}

// Decimals are written with up to 6 fraction digits and integer parts below 10^9: 15
// significant digits, which a double tells apart, so a value near a bound compares in
// python3-jsonschema (doubles) as its digits do.
constexpr int kFractionDigits = 6;
constexpr uint64_t kDecimalWholeLimit = 999'999'999;

struct BoundSide {
  double value;  // >= 0
  bool strict;
};

// A non-negative double as the digits its shortest form shows: whole part, fraction digits
// (no trailing zeros). The bound a schema wrote, not its binary expansion.
struct DecimalDigits {
  uint64_t whole;
  std::string fraction;
};

DecimalDigits decimal_of(double v) {
  std::string s = fmt::format("{}", v);
  int exponent = 0;
  if (const size_t e = s.find_first_of("eE"); e != std::string::npos) {
    exponent = std::stoi(s.substr(e + 1));
    s = s.substr(0, e);
  }
  const size_t dot = s.find('.');
  const std::string digits = dot == std::string::npos ? s : s.substr(0, dot) + s.substr(dot + 1);
  const int point = static_cast<int>(dot == std::string::npos ? s.size() : dot) + exponent;
  DecimalDigits d{0, ""};
  std::string whole = "0";
  if (point <= 0) {
    d.fraction = std::string(-point, '0') + digits;
  } else if (point >= static_cast<int>(digits.size())) {
    whole = digits + std::string(point - digits.size(), '0');
  } else {
    whole = digits.substr(0, point);
    d.fraction = digits.substr(point);
  }
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  d.whole = std::stoull(whole);
  return d;
}

// k fraction digits, as a k-digit number, at or past (past: strict) the fraction `f`.
struct FractionBound {
  std::string digits;
  bool strict;
};

std::string zero_padded(uint64_t v, size_t k) {
  const std::string s = std::to_string(v);
  return std::string(k - s.size(), '0') + s;
}

// Fractions of exactly k digits between the bounds (nullopt: 0 or 1).
std::string fractions_of_length(size_t k, const std::optional<FractionBound>& lo, const std::optional<FractionBound>& hi) {
  const uint64_t top = power_of_ten(k) - 1;
  uint64_t a = 0, b = top;
  if (lo) {
    const bool more = lo->digits.size() > k;  // nonzero digits past k: the k-digit head is below
    a = std::stoull((lo->digits + std::string(k, '0')).substr(0, k)) + ((more || lo->strict) ? 1 : 0);
  }
  if (hi) {
    const bool more = hi->digits.size() > k;
    const uint64_t head = std::stoull((hi->digits + std::string(k, '0')).substr(0, k));
    if (!more && hi->strict && head == 0) return "";
    b = !more && hi->strict ? head - 1 : head;
  }
  if (a > b || a > top) return "";
  return same_length(zero_padded(a, k), zero_padded(b, k));
}

std::string fractions(const std::optional<FractionBound>& lo, const std::optional<FractionBound>& hi) {
  std::vector<std::string> alts;
  for (size_t k = 1; k <= kFractionDigits; ++k) {
    const std::string g = fractions_of_length(k, lo, hi);
    if (!g.empty()) alts.push_back(g);
  }
  return alts.empty() ? "" : number_alternatives(alts);
}

// Decimals x.f (a fraction always written) with from <= x <= to (strict sides exclusive).
std::string decimals_between(const BoundSide& from, const std::optional<BoundSide>& to) {
  const DecimalDigits lo = decimal_of(from.value);
  if (lo.whole > kDecimalWholeLimit || (to && to->value < from.value)) return "";
  const bool open = !to || to->value > static_cast<double>(kDecimalWholeLimit);
  const DecimalDigits hi = open ? DecimalDigits{kDecimalWholeLimit + 1, ""} : decimal_of(to->value);
  const FractionBound lo_f{lo.fraction, from.strict};
  const std::optional<FractionBound> hi_f = open ? std::nullopt : std::optional<FractionBound>({hi.fraction, to->strict});
  const auto with_whole = [](uint64_t whole, const std::string& frac) {
    return frac.empty() ? "" : fmt::format("\"{}.\" {}", whole, frac);
  };
  std::vector<std::string> alts;
  if (lo.whole == hi.whole) {
    alts.push_back(with_whole(lo.whole, fractions(lo_f, hi_f)));
  } else {
    alts.push_back(with_whole(lo.whole, fractions(lo_f, std::nullopt)));
    const uint64_t inner_lo = lo.whole + 1, inner_hi = open ? kDecimalWholeLimit : hi.whole - 1;
    if (inner_lo <= inner_hi)
      alts.push_back("(" + integer_range_gbnf(inner_lo, inner_hi) + fmt::format(") \".\" [0-9]{{1,{}}}", kFractionDigits));
    if (!open) alts.push_back(with_whole(hi.whole, fractions(std::nullopt, hi_f)));
  }
  std::erase(alts, std::string());
  return alts.empty() ? "" : number_alternatives(alts);
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  int64_t l = lo.value_or(-kOpenIntegerLimit), h = hi.value_or(kOpenIntegerLimit);
  // An open side reaches past a closed one beyond the open limit.
  if (!hi && h < l) h = std::numeric_limits<int64_t>::max();
  if (!lo && l > h) l = std::numeric_limits<int64_t>::min();
  std::vector<std::string> alts;
  if (h >= 0) alts.push_back(magnitude_range(static_cast<uint64_t>(std::max<int64_t>(l, 0)), static_cast<uint64_t>(h)));
  if (l < 0) {
    const uint64_t nearest = h < 0 ? negated_magnitude(h) : 1;
    const std::string m = magnitude_range(nearest, negated_magnitude(l));
    alts.push_back("\"-\" " + (m.front() == '(' || m.find(' ') == std::string::npos ? m : "(" + m + ")"));
  }
  return number_alternatives(alts);
}

std::optional<IntegerSpan> integers_within(const NumberBounds& b) {
  if (!bound_usable(b.lower) || !bound_usable(b.upper)) return std::nullopt;
  IntegerSpan s;
  if (b.lower) s.lo = static_cast<int64_t>(b.lower_exclusive ? std::floor(*b.lower) + 1 : std::ceil(*b.lower));
  if (b.upper) s.hi = static_cast<int64_t>(b.upper_exclusive ? std::ceil(*b.upper) - 1 : std::floor(*b.upper));
  if (s.lo && s.hi && *s.lo > *s.hi) return std::nullopt;
  return s;
}

std::string number_range_gbnf(const NumberBounds& b) {
  if (!bound_usable(b.lower) || !bound_usable(b.upper)) return "";
  std::vector<std::string> alts;
  if (const auto whole = integers_within(b)) alts.push_back(integer_range_gbnf(whole->lo, whole->hi));
  // x.f for x >= 0 within [max(lower, 0), upper].
  if (!b.upper || *b.upper >= 0) {
    const BoundSide from = b.lower && *b.lower >= 0 ? BoundSide{*b.lower, b.lower_exclusive} : BoundSide{0, false};
    const std::optional<BoundSide> to = b.upper ? std::optional<BoundSide>(BoundSide{*b.upper, b.upper_exclusive}) : std::nullopt;
    const std::string g = decimals_between(from, to);
    if (!g.empty()) alts.push_back(g);
  }
  // -x.f: x within [max(-upper, 0), -lower].
  if (!b.lower || *b.lower <= 0) {
    const BoundSide from = b.upper && *b.upper <= 0 ? BoundSide{-*b.upper, b.upper_exclusive} : BoundSide{0, false};
    const std::optional<BoundSide> to = b.lower ? std::optional<BoundSide>(BoundSide{-*b.lower, b.lower_exclusive}) : std::nullopt;
    const std::string g = decimals_between(from, to);
    if (!g.empty()) alts.push_back("\"-\" (" + g + ")");
  }
  if (alts.empty()) return "";
  return number_alternatives(alts);
}

}  // namespace strata
