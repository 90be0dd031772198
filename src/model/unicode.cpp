#include "model/unicode.h"

#include <algorithm>

namespace strata {

namespace {
struct CodepointRange {
  uint32_t first, last;
};
struct CodepointMap {
  uint32_t from, to;
};
struct CodepointRangeMap {
  uint32_t first, last, to;
};
#include "model/unicode_lowercase.inc"
#include "model/unicode_nfd.inc"
#include "model/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodepointRange (&ranges)[N], uint32_t cp) {
  const auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                   [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}
}  // namespace

bool is_letter(uint32_t cp) {
  return in_ranges(kLetterRanges, cp);
}
bool is_number(uint32_t cp) {
  return in_ranges(kNumberRanges, cp);
}
bool is_space(uint32_t cp) {
  return in_ranges(kSpaceRanges, cp);
}
bool is_punctuation(uint32_t cp) {
  return in_ranges(kPunctuationRanges, cp);
}
bool is_mark(uint32_t cp) {
  return in_ranges(kMarkRanges, cp);
}
bool is_control(uint32_t cp) {
  return in_ranges(kControlRanges, cp);
}

uint32_t to_lower(uint32_t cp) {
  const auto it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                                   [](const CodepointMap& m, uint32_t v) { return m.from < v; });
  return it != std::end(kLowercase) && it->from == cp ? it->to : cp;
}

uint32_t nfd_first(uint32_t cp) {
  const auto it =
      std::upper_bound(std::begin(kNfdFirst), std::end(kNfdFirst), cp,
                       [](uint32_t v, const CodepointRangeMap& r) { return v < r.first; });
  if (it == std::begin(kNfdFirst)) return cp;
  const auto& r = *std::prev(it);
  return cp <= r.last ? r.to : cp;
}

std::vector<Utf8Char> split_utf8(std::string_view s) {
  std::vector<Utf8Char> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint32_t n = static_cast<uint32_t>(s.size());
  uint32_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    uint32_t len = 0, cp = 0, min = 0;
    if (b < 0x80)
      len = 1, cp = b;
    else if ((b & 0xe0) == 0xc0)
      len = 2, cp = b & 0x1f, min = 0x80;
    else if ((b & 0xf0) == 0xe0)
      len = 3, cp = b & 0x0f, min = 0x800;
    else if ((b & 0xf8) == 0xf0)
      len = 4, cp = b & 0x07, min = 0x10000;
    bool ok = len != 0 && i + len <= n;
    for (uint32_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (ok && len > 1 && (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (!ok) {
      out.push_back({0xfffd, i, 1});
      ++i;
    } else {
      out.push_back({cp, i, len});
      i += len;
    }
  }
  return out;
}

std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

}  // namespace strata
