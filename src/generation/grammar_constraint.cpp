#include "generation/grammar_constraint.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.h"

namespace strata {

// The vocabulary's token bytes as a trie: node 0 is the root; each node lists the tokens whose
// bytes end there and its children by next byte.
struct TokenTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Node> nodes;

  explicit TokenTrie(const Tokenizer& tok) {
    nodes.emplace_back();
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (!tok.has_text(id) || id == tok.eos()) continue;
      const std::string bytes = tok.token_bytes(id);
      if (bytes.empty()) continue;
      int32_t n = 0;
      for (unsigned char b : bytes) {
        int32_t next = -1;
        for (const auto& [c, child] : nodes[static_cast<size_t>(n)].children)
          if (c == b) next = child;
        if (next < 0) {
          next = static_cast<int32_t>(nodes.size());
          nodes[static_cast<size_t>(n)].children.emplace_back(b, next);
          nodes.emplace_back();
        }
        n = next;
      }
      nodes[static_cast<size_t>(n)].tokens.push_back(id);
    }
  }
};

namespace {

// One trie per tokenizer for the process's life: requests with grammars share it.
std::shared_ptr<const TokenTrie> trie_for(const Tokenizer& tok) {
  static std::mutex m;
  static std::map<const Tokenizer*, std::shared_ptr<const TokenTrie>> tries;
  std::lock_guard lock(m);
  auto& t = tries[&tok];
  if (!t) t = std::make_shared<const TokenTrie>(tok);
  return t;
}

// Bytes in a UTF-8 character that starts with b (0: b cannot start one).
int utf8_length(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b >> 5) == 6) return 2;
  if ((b >> 4) == 14) return 3;
  if ((b >> 3) == 30) return 4;
  return 0;
}

// The smallest code point a UTF-8 character of n bytes may encode (shorter forms are invalid).
uint32_t min_code_point(size_t n) { return n == 1 ? 0 : n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000; }

uint32_t decode(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  const int n = static_cast<int>(s.size());
  uint32_t cp = n == 1 ? b0 : b0 & (0x7f >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[static_cast<size_t>(k)]) & 0x3f);
  return cp;
}

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, const Tokenizer& tokenizer)
    : grammar_(std::move(grammar)), tok_(tokenizer), trie_(trie_for(tokenizer)), cursor_{GrammarState(*grammar_), {}} {}

GrammarConstraint::~GrammarConstraint() = default;

bool GrammarConstraint::feed(Cursor& c, std::string_view bytes) {
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    if (c.pending.empty()) {
      if (utf8_length(b) == 0) return false;
    } else if ((b & 0xc0) != 0x80) {
      return false;  // a character cut short
    }
    c.pending += ch;
    const auto need = static_cast<size_t>(utf8_length(static_cast<uint8_t>(c.pending[0])));
    if (c.pending.size() < need) continue;
    const uint32_t cp = decode(c.pending);
    c.pending.clear();
    if (cp < min_code_point(need) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (!c.state.advance(cp)) return false;
  }
  if (c.pending.empty()) return true;
  // The characters these first bytes may still become.
  const auto need = static_cast<size_t>(utf8_length(static_cast<uint8_t>(c.pending[0])));
  std::string lo = c.pending, hi = c.pending;
  lo.resize(need, static_cast<char>(0x80));
  hi.resize(need, static_cast<char>(0xbf));
  const uint32_t from = std::max(decode(lo), min_code_point(need));
  const uint32_t to = std::min<uint32_t>(decode(hi), 0x10ffff);
  return from <= to && c.state.could_take(from, to);
}

bool GrammarConstraint::allows(int32_t token) const {
  if (token == tok_.eos()) return cursor_.pending.empty() && cursor_.state.accepting();
  if (token < 0 || token >= tok_.n_vocab() || !tok_.has_text(token)) return false;
  const std::string bytes = tok_.token_bytes(token);
  if (bytes.empty()) return false;
  auto c = std::make_unique<Cursor>(cursor_);
  if (!feed(*c, bytes)) return false;
  checked_token_ = token;
  checked_ = std::move(c);
  return true;
}

std::string GrammarConstraint::state_key() const {
  std::string key = cursor_.pending;
  key += '|';
  for (const auto& stack : cursor_.state.stacks()) {
    key.append(reinterpret_cast<const char*>(stack.data()), stack.size() * sizeof(GrammarPosition));
    key += '|';
  }
  return key;
}

void GrammarConstraint::walk(int32_t node, const Cursor& c, std::vector<uint8_t>& allowed) const {
  const auto& n = trie_->nodes[static_cast<size_t>(node)];
  for (int32_t t : n.tokens) allowed[static_cast<size_t>(t)] = 1;
  for (const auto& [b, child] : n.children) {
    Cursor next = c;
    const char byte = static_cast<char>(b);
    if (feed(next, std::string_view(&byte, 1))) walk(child, next, allowed);
  }
}

void GrammarConstraint::mask(std::vector<uint8_t>& allowed) const {
  const std::string key = state_key();
  if (const auto it = masks_.find(key); it != masks_.end()) {
    allowed = it->second;
    return;
  }
  allowed.assign(static_cast<size_t>(tok_.n_vocab()), 0);
  if (tok_.eos() >= 0 && allows(tok_.eos())) allowed[static_cast<size_t>(tok_.eos())] = 1;
  const auto& root = trie_->nodes[0];
  for (const auto& [b, child] : root.children) {
    Cursor next = cursor_;
    const char byte = static_cast<char>(b);
    if (feed(next, std::string_view(&byte, 1))) walk(child, next, allowed);
  }
  if (masks_.size() >= 64) masks_.clear();  // bounded: a grammar with many states recomputes
  masks_.emplace(key, allowed);
}

void GrammarConstraint::accept(int32_t token) {
  if (token == tok_.eos()) return;
  if (token == checked_token_ && checked_) {
    cursor_ = std::move(*checked_);
  } else if (!feed(cursor_, tok_.token_bytes(token))) {
    throw Error("internal: a token the grammar does not allow was accepted");
  }
  checked_token_ = -1;
  checked_.reset();
}

bool GrammarConstraint::finished() const {
  if (!cursor_.pending.empty() || !cursor_.state.accepting()) return false;
  return std::all_of(cursor_.state.stacks().begin(), cursor_.state.stacks().end(),
                     [](const GrammarStack& s) { return s.empty(); });
}

}  // namespace strata
