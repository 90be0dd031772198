// Validators for flag values, stricter than CLI11's: CLI::Range lets NaN through (every
// comparison with NaN is false) and CLI11 clamps integers beyond their type silently. These
// refuse both, with the flag's value named in the one-line error.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

namespace strata {

// A number in [lo, hi]: for integer types a whole number that fits, for floating-point types a
// finite one (not nan or inf).
template <typename T>
CLI::Validator in_range(T lo, T hi) {
  const std::string description = fmt::format("[{} - {}]", lo, hi);
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        if constexpr (std::is_integral_v<T>) {
          T v{};
          const char* end = text.data() + text.size();
          const auto [ptr, ec] = std::from_chars(text.data(), end, v);
          if (ec == std::errc::result_out_of_range) return "value " + text + " is out of range";
          if (ec != std::errc() || ptr != end) return "value '" + text + "' is not a whole number";
          if (v < lo || v > hi) return fmt::format("value {} not in range [{} - {}]", text, lo, hi);
        } else {
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || end != text.c_str() + text.size())
            return "value '" + text + "' is not a number";
          if (!std::isfinite(v)) return "value " + text + " is not a finite number";
          if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)))
            return fmt::format("value {} not in range [{} - {}]", text, lo, hi);
        }
        return {};
      },
      description);
}

// Any value of T: a whole number that fits in it (for --seed, whose range is its type).
template <typename T>
CLI::Validator fits() {
  return in_range<T>(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

// A string that is not empty ("--ram-budget ''" meant no budget).
inline const CLI::Validator kNotEmpty(
    [](std::string& text) -> std::string {
      return text.empty() ? std::string("the value is empty") : std::string();
    },
    "TEXT");

}  // namespace strata
