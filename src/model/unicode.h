// UTF-8 splitting and the Unicode classes the BPE pre-tokenizers need.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// A code point and where its bytes are. Invalid UTF-8 bytes become one entry each with
// codepoint 0xFFFD, so nothing of the input is ever dropped.
struct Utf8Char {
  uint32_t codepoint;
  uint32_t offset;
  uint32_t length;
};
std::vector<Utf8Char> split_utf8(std::string_view text);
std::string encode_utf8(uint32_t codepoint);

bool is_letter(uint32_t cp);       // \p{L}
bool is_number(uint32_t cp);       // \p{N}
bool is_space(uint32_t cp);        // \s
bool is_punctuation(uint32_t cp);  // \p{P}
bool is_mark(uint32_t cp);         // \p{M}
bool is_control(uint32_t cp);      // \p{Cc}, \p{Cf}, \p{Co}, \p{Cs}
// Unicode's simple lowercase mapping, and the first code point of the NFD decomposition (what
// llama.cpp's WordPiece normalizer reads; unicode_lowercase.inc, unicode_nfd.inc).
uint32_t to_lower(uint32_t cp);
uint32_t nfd_first(uint32_t cp);

// SentencePiece's mark for a space (U+2581), which SPM, WordPiece-as-SPM and Gemma vocabularies
// write where the text has ' '.
inline const std::string kSpaceMark = "\xe2\x96\x81";

}  // namespace strata
