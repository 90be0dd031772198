// The GBNF parser and matcher on arbitrary grammars (issue 52): each input is a grammar, then
// after a NUL byte a text to match a code point at a time. Parsing either gives a grammar or
// fails with strata::Error (GrammarLimit included); matching either advances, refuses, or fails
// with GrammarLimit. Nothing else may escape, and the limits keep every input fast and small
// (no deep recursion: 30,000 nested groups once overflowed the stack).
#include <cstddef>
#include <cstdint>
#include <string>

#include "generation/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string gbnf = input.substr(0, nul);
  const std::string text = nul == std::string::npos ? "" : input.substr(nul + 1);
  try {
    const strata::Grammar g = strata::Grammar::parse(gbnf);
    strata::GrammarState state(g);
    for (unsigned char c : text) {
      if (!state.advance(c)) break;
      (void)state.accepting();
      (void)state.could_take(0x80, 0x10ffff);
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
