// Which seed a generation samples with, in one place for the CLI and the server. As OpenAI and
// llama-server do: a seed the request names reproduces its text; none (or llama.cpp's -1) draws
// a fresh one, so "regenerate" gives another reply; a server started with --seed N makes N the
// seed of requests that name none.
#pragma once

#include <cstdint>
#include <optional>

namespace strata {

// -1 where a seed is asked for: draw a fresh one.
inline constexpr int64_t kRandomSeed = -1;

// `asked`: the request's seed, if it names one; `fallback`: the server's or command's default
// (kRandomSeed: none); `fresh`: a newly drawn seed, used when neither fixes one.
inline uint64_t choose_seed(std::optional<int64_t> asked, int64_t fallback, uint64_t fresh) {
  if (asked.has_value() && *asked != kRandomSeed) return static_cast<uint64_t>(*asked);
  if (!asked.has_value() && fallback != kRandomSeed) return static_cast<uint64_t>(fallback);
  return fresh;
}

// A seed drawn from the system's entropy and the clock (different for every call).
uint64_t fresh_seed();

}  // namespace strata
