// Numeric bounds of a JSON schema (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as GBNF
// over the digits JSON writes: an integer range spelled digit by digit, as a regular expression
// for a range would be, with no leading zeros and "-" before negatives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata {

// Integers the grammar spells where a side of a range is open: the 16 digits the unbounded
// `integer` rule takes (json_schema_grammar's primitives).
inline constexpr int64_t kOpenIntegerLimit = 9'999'999'999'999'999;

// The bounds a schema sets, each inclusive or exclusive (a schema gives at most one per side).
struct NumberBounds {
  std::optional<double> lower, upper;
  bool lower_exclusive = false, upper_exclusive = false;
};

// GBNF (an expression, no rule names, no trailing whitespace) taking exactly the decimal
// integers in [lo, hi]; nullopt sides are open up to kOpenIntegerLimit. Precondition: lo <= hi.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// The whole integers within the bounds, as [lo, hi] (nullopt: open); nullopt when none is, or a
// bound is beyond what an int64 holds (the caller names the keyword).
struct IntegerSpan {
  std::optional<int64_t> lo, hi;
};
std::optional<IntegerSpan> integers_within(const NumberBounds& b);

// GBNF for JSON numbers within the bounds: the whole integers within them, and decimals with 1
// to 6 fraction digits and an integer part below 10^9 (15 significant digits: near a bound a
// double compares as the digits do); no exponents. Bounds are read as the shortest decimal
// that gives their double (0.3, not its binary expansion). Empty when no number is written
// (the caller refuses the schema).
std::string number_range_gbnf(const NumberBounds& b);

}  // namespace strata
