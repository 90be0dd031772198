// A grammar as the sampler's constraint: which tokens may come next, from the grammar's state
// after the text generated so far. A token's bytes are fed a code point at a time; a token may
// end inside a UTF-8 character (byte-fallback vocabularies), and is allowed when the grammar
// could take some character that starts with those bytes. EOS is allowed once the grammar may
// end (and only then); control tokens never. The whole-vocabulary mask walks a byte trie of the
// vocabulary (built once per tokenizer and shared), so a rejected subtree costs one step.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "model/tokenizer.h"
#include "runtime/grammar.h"
#include "runtime/sampler.h"

namespace strata {

struct TokenTrie;

class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, const Tokenizer& tokenizer);
  ~GrammarConstraint() override;

  bool allows(int32_t token) const override;
  void mask(std::vector<uint8_t>& allowed) const override;
  void accept(int32_t token) override;
  // The grammar may end here and nothing can follow: generation is done.
  bool finished() const;

 private:
  struct Cursor {
    GrammarState state;
    std::string pending;  // the first bytes of a UTF-8 character not yet complete
  };
  static bool feed(Cursor& c, std::string_view bytes);
  void walk(int32_t node, const Cursor& c, std::vector<uint8_t>& allowed) const;

  std::shared_ptr<const Grammar> grammar_;
  const Tokenizer& tok_;
  std::shared_ptr<const TokenTrie> trie_;
  Cursor cursor_;
};

}  // namespace strata
