// DeepSeek's pre-tokenizers as llama.cpp v0.5.0 runs them (llama-vocab.cpp): several regexes in
// sequence, each splitting every piece the previous ones left into its matches and the text
// between them. DeepSeek Coder: [\r\n] | \s?\p{L}+ | \s?\p{P}+ | [CJK]+ | \p{N}. DeepSeek LLM:
// [\r\n] | \s?[cased letters]+ | \s?[ASCII and full-width symbols]+ | \s+$ | [CJK]+ | \p{N}+.
// llama.cpp runs the expressions with a \p class through std::regex over text whose non-ASCII
// code points stand for their category (there \s is ASCII whitespace or a non-ASCII space), the
// others through std::wregex over the code points (there \s is ASCII whitespace only; $ is the
// end of the piece): the matchers below follow each.
#include <algorithm>
#include <functional>

#include "model/pretokenize.h"
#include "model/unicode.h"

namespace strata {

namespace {

using Chars = std::vector<Utf8Char>;
// The code points a regex matches at position i of a piece, 0 for none.
using Matcher = std::function<size_t(const Chars&, size_t)>;

// Each piece split into the matches of `match`, leftmost first, and the text between them.
Pieces split_matches(std::string_view text, const Pieces& pieces, const Matcher& match) {
  Pieces out;
  for (const auto& piece : pieces) {
    const uint32_t offset = piece.first, length = piece.second;
    const Chars cs = split_utf8(text.substr(offset, length));
    const auto at = [&](size_t i) { return i < cs.size() ? cs[i].offset : length; };
    size_t gap = 0;
    for (size_t i = 0; i < cs.size();) {
      const size_t n = match(cs, i);
      if (n == 0) {
        ++i;
        continue;
      }
      if (i > gap) out.emplace_back(offset + at(gap), at(i) - at(gap));
      out.emplace_back(offset + at(i), at(i + n) - at(i));
      i += n;
      gap = i;
    }
    if (gap < cs.size()) out.emplace_back(offset + at(gap), length - at(gap));
  }
  return out;
}

bool ascii_space(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}
// std::regex over category-collapsed text: non-ASCII whitespace stands as \v.
bool collapsed_space(uint32_t c) {
  return ascii_space(c) || (c >= 128 && is_space(c));
}
bool collapsed_letter(uint32_t c) {
  return c < 128 ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') : is_letter(c);
}
bool collapsed_number(uint32_t c) {
  return c < 128 ? (c >= '0' && c <= '9') : is_number(c);
}
bool collapsed_punctuation(uint32_t c) {
  return is_punctuation(c);  // ASCII too: !"#%&'()*,-./:;?@[\]_{}, as llama.cpp's map
}
bool newline(uint32_t c) {
  return c == '\r' || c == '\n';
}
bool cjk(uint32_t c) {  // [一-龥ࠀ-一가-퟿]
  return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
}

struct Range {
  uint32_t first, last;
};
// DeepSeek LLM's letters (its tokenizer.json's class: the cased letters), sorted.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x376},     {0x377, 0x377},
    {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},
    {0x48A, 0x52F},     {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},
    {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},
    {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},
    {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},
    {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2183},
    {0x2184, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF2},   {0x2CF3, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},
    {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},
    {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
    {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
bool deepseek_letter(uint32_t c) {
  const auto it = std::upper_bound(std::begin(kDeepseekLetters), std::end(kDeepseekLetters), c,
                                   [](uint32_t v, const Range& r) { return v < r.first; });
  return it != std::begin(kDeepseekLetters) && c <= std::prev(it)->last;
}
bool deepseek_symbol(uint32_t c) {  // [!-/:-~！-／：-～‘-‟　-。]
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
         (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
         (c >= 0x3000 && c <= 0x3002);
}

template <typename Pred>
size_t run(const Chars& cs, size_t i, Pred in) {
  size_t k = i;
  while (k < cs.size() && in(cs[k].codepoint)) ++k;
  return k - i;
}

Matcher one_of(bool (*in)(uint32_t)) {
  return [in](const Chars& cs, size_t i) -> size_t { return in(cs[i].codepoint) ? 1 : 0; };
}
Matcher run_of(bool (*in)(uint32_t)) {
  return [in](const Chars& cs, size_t i) { return run(cs, i, in); };
}
// \s?X+: a space joins the run after it.
Matcher space_then_run(bool (*space)(uint32_t), bool (*in)(uint32_t)) {
  return [space, in](const Chars& cs, size_t i) -> size_t {
    if (space(cs[i].codepoint) && i + 1 < cs.size() && in(cs[i + 1].codepoint))
      return 1 + run(cs, i + 1, in);
    return run(cs, i, in);
  };
}
// \s+$ (std::wregex: ASCII whitespace, to the end of the piece).
size_t trailing_space(const Chars& cs, size_t i) {
  const size_t n = run(cs, i, ascii_space);
  return n > 0 && i + n == cs.size() ? n : 0;
}

Pieces split_all(std::string_view text, std::initializer_list<Matcher> matchers) {
  if (text.empty()) return {};
  Pieces pieces{{0, static_cast<uint32_t>(text.size())}};
  for (const Matcher& m : matchers) pieces = split_matches(text, pieces, m);
  return pieces;
}

}  // namespace

Pieces deepseek_coder_pieces(std::string_view text) {
  return split_all(text, {one_of(newline), space_then_run(collapsed_space, collapsed_letter),
                          space_then_run(collapsed_space, collapsed_punctuation), run_of(cjk),
                          one_of(collapsed_number)});
}

Pieces deepseek_llm_pieces(std::string_view text) {
  return split_all(text, {one_of(newline), space_then_run(ascii_space, deepseek_letter),
                          space_then_run(ascii_space, deepseek_symbol), trailing_space, run_of(cjk),
                          run_of(collapsed_number)});
}

}  // namespace strata
