// A grammar as the sampler's constraint: which tokens may come next, from the grammar's state
// after the text generated so far. A token's bytes are fed a code point at a time; a token may
// end inside a UTF-8 character (byte-fallback vocabularies), and is allowed when the grammar
// could take some character that starts with those bytes. EOS is allowed once the grammar may
// end (and only then); control tokens never. The whole-vocabulary mask walks a byte trie of the
// vocabulary (built once per tokenizer and shared), so a rejected subtree costs one step.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "model/tokenizer.h"
#include "generation/grammar.h"
#include "generation/sampler.h"

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
  std::string state_key() const;

  std::shared_ptr<const Grammar> grammar_;
  const Tokenizer& tok_;
  std::shared_ptr<const TokenTrie> trie_;
  Cursor cursor_;
  // The cursor after the token allows() last checked and allowed: accept() of the same token
  // (the sampler's usual order) takes it instead of feeding the bytes again.
  mutable int32_t checked_token_ = -1;
  mutable std::unique_ptr<Cursor> checked_;
  // Masks of states met before: JSON keeps returning to the same few states (inside a string,
  // after a comma), so the vocabulary is walked once per state, not once per rejected token.
  mutable std::map<std::string, std::vector<uint8_t>> masks_;
};

}  // namespace strata
