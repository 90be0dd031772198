// Grammars for constrained generation, in llama.cpp's GBNF: `name ::= alternatives` rules over
// "literals", [character classes] (ranges, ^ negation), `.`, rule references, ( groups ),
// repetition * + ? {m} {m,} {m,n}, # comments; generation starts at `root`. A grammar compiles
// to rules of alternatives of elements (a code point set or a rule), repetition rewritten as
// helper rules, and is matched a code point at a time by a set of stacks (GrammarState):
// a pure data structure the sampler's constraint (grammar_constraint.h) walks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace strata {

// What one grammar may cost, so that no request's grammar can take the server's stack, memory
// or time: a 436-byte grammar made 2^20 parse stacks, a 30 KB literal repeated {1000} 1.86 GB.
inline constexpr int kMaxGrammarGroupDepth = 128;        // ( ... ) nested in the text
inline constexpr size_t kMaxGrammarElements = 1 << 17;   // elements and ranges after expansion
inline constexpr size_t kMaxGrammarStacks = 4096;        // paths matched at once
inline constexpr size_t kMaxGrammarPositions = 1 << 20;  // their positions, all stacks together

// A grammar past one of those limits, at parse time or while matching: the request's fault,
// not the engine's (a 400 at admission; mid-reply, that request's error alone).
class GrammarLimit : public Error {
 public:
  using Error::Error;
};

struct GrammarElement {
  // A code point set (ranges, inclusive; negated: every code point outside them), or a rule.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool negated = false;
  int32_t rule = -1;  // >= 0: a reference to rules[rule]
  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (a partial UTF-8 character's possibilities).
  bool matches_any(uint32_t lo, uint32_t hi) const;
};

using GrammarAlternative = std::vector<GrammarElement>;

struct Grammar {
  std::vector<std::vector<GrammarAlternative>> rules;  // rules[0] is root
  std::vector<std::string> names;                       // of each rule (helpers: "name_N")

  // Parses GBNF text; Error naming the line and the problem (an undefined rule, no root, left
  // recursion, bad syntax), GrammarLimit past the limits above (its start state included).
  static Grammar parse(const std::string& text);

  // The heap bytes its rules hold (what a server counts while a request uses it).
  uint64_t memory_bytes() const;
};

// Where a match may be: per stack the positions still to finish, innermost last; an empty stack
// has completed the root. Stacks are kept sorted and unique.
struct GrammarPosition {
  int32_t rule;
  int32_t alternative;
  int32_t element;
  auto operator<=>(const GrammarPosition&) const = default;
};
using GrammarStack = std::vector<GrammarPosition>;

class GrammarState {
 public:
  explicit GrammarState(const Grammar& g);  // at the start of root
  // Advances by one code point; false (and the state unchanged) if no stack accepts it;
  // GrammarLimit if the paths it leads to exceed the limits above.
  bool advance(uint32_t cp);
  // Whether some stack could take a code point in [lo, hi].
  bool could_take(uint32_t lo, uint32_t hi) const;
  bool accepting() const;  // the root may end here
  bool dead() const { return stacks_.empty(); }
  const std::vector<GrammarStack>& stacks() const { return stacks_; }

 private:
  // The stacks `s` becomes once every rule reference on its top is entered (iterative: a chain
  // of 60,000 rules is no recursion), appended to out; `count` is the work of one step across
  // calls (stacks visited, positions out holds). GrammarLimit past the limits.
  struct ExpandCount {
    size_t visited = 0, positions = 0;
  };
  void expand(GrammarStack s, std::vector<GrammarStack>& out, ExpandCount& count) const;
  void normalize(std::vector<GrammarStack>& stacks) const;

  const Grammar* g_;
  std::vector<GrammarStack> stacks_;
};

// GBNF for any JSON value (response_format json_object: an object at the root).
std::string json_object_grammar();

}  // namespace strata
