// SentencePiece BPE encoding, as sentencepiece's bpe_model.cc does it with an identity
// normalizer: spaces become U+2581, a dummy prefix U+2581 is added (add_space_prefix), the text
// is split into characters (user-defined pieces kept whole), then the adjacent pair whose
// concatenation is a vocabulary piece with the highest score is merged, leftmost first on ties,
// until no pair is in the vocabulary. Leftover symbols not in the vocabulary become their
// <0xXX> byte tokens (byte fallback) or the unknown token.
#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <string_view>

#include "core/error.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace strata {

namespace {


class SpmTokenizer : public Tokenizer {
 public:
  explicit SpmTokenizer(const GgufFile& f) {
    std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
    load_common(f);
    const GgufValue& scores = f.get("tokenizer.ggml.scores");
    if (scores.type != GgufType::Array || scores.items.size() != tokens_.size())
      fail("'{}': tokenizer.ggml.scores does not have one entry per token", f.path());
    for (const auto& s : scores.items) scores_.push_back(static_cast<float>(s.as_float("scores")));
    if (const GgufValue* v = f.find("tokenizer.ggml.add_space_prefix"))
      add_space_prefix_ = v->as_bool("tokenizer.ggml.add_space_prefix");
    for (int32_t i = 0; i < n_vocab(); ++i) {
      const TokenType t = types_[i];
      // Only these take part in merges (sentencepiece's pieces_ map).
      if (t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused)
        mergeable_.emplace(tokens_[i], i);
      if (t == TokenType::UserDefined) user_defined_.push_back(tokens_[i]);
      if (t == TokenType::Byte) {
        const uint8_t value = byte_token_value(tokens_[i], i, f.path());
        byte_ids_[value] = i;
        byte_values_.emplace(i, value);
      }
    }
  }

  const char* kind() const override { return "llama (SentencePiece BPE)"; }

  std::string token_bytes(int32_t id) const override {
    if (types_[id] == TokenType::Byte)
      return std::string(1, static_cast<char>(byte_values_.at(id)));
    // The piece with each space mark (U+2581) as a space, built by appending rather than
    // replacing in place (GCC 12 warns -Wrestrict falsely on string::replace here).
    const std::string_view piece = tokens_[id];
    std::string s;
    s.reserve(piece.size());
    size_t from = 0;
    for (size_t pos; (pos = piece.find(kSpaceMark, from)) != std::string_view::npos;) {
      s.append(piece.substr(from, pos - from)).push_back(' ');
      from = pos + kSpaceMark.size();
    }
    s.append(piece.substr(from));
    return s;
  }

 protected:
  bool strip_leading_space() const override { return add_space_prefix_; }

  std::vector<int32_t> encode_text(std::string_view text, bool at_start) const override {
    if (text.empty()) return {};
    std::string norm;
    norm.reserve(text.size() * 2 + 3);
    if (add_space_prefix_ && at_start) norm += kSpaceMark;
    for (char c : text) {
      if (c == ' ')
        norm += kSpaceMark;
      else
        norm += c;
    }

    struct Symbol {
      uint32_t offset, length;
      int prev, next;
      bool frozen;  // a user-defined piece: never merged
    };
    std::vector<Symbol> symbols;
    const auto chars = split_utf8(norm);
    for (size_t i = 0; i < chars.size();) {
      size_t matched = 0;
      for (const auto& u : user_defined_) {
        if (u.size() > matched && norm.compare(chars[i].offset, u.size(), u) == 0)
          matched = u.size();
      }
      const int idx = static_cast<int>(symbols.size());
      if (matched > 0) {
        symbols.push_back(
            {chars[i].offset, static_cast<uint32_t>(matched), idx - 1, idx + 1, true});
        const uint32_t end = chars[i].offset + static_cast<uint32_t>(matched);
        while (i < chars.size() && chars[i].offset < end) ++i;
      } else {
        symbols.push_back({chars[i].offset, chars[i].length, idx - 1, idx + 1, false});
        ++i;
      }
    }
    symbols.back().next = -1;

    struct Pair {
      float score;
      int left, right;
      uint32_t size;
    };
    auto worse = [](const Pair& a, const Pair& b) {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> agenda(worse);
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
      const uint32_t size = symbols[left].length + symbols[right].length;
      const auto it = mergeable_.find(std::string_view(norm).substr(symbols[left].offset, size));
      if (it == mergeable_.end()) return;
      agenda.push({scores_[it->second], left, right, size});
    };
    for (size_t i = 1; i < symbols.size(); ++i)
      try_add(static_cast<int>(i) - 1, static_cast<int>(i));

    while (!agenda.empty()) {
      const Pair top = agenda.top();
      agenda.pop();
      Symbol& l = symbols[top.left];
      Symbol& r = symbols[top.right];
      if (l.length == 0 || r.length == 0 || l.length + r.length != top.size) continue;
      l.length += r.length;
      r.length = 0;
      l.next = r.next;
      if (r.next >= 0) symbols[r.next].prev = top.left;
      try_add(l.prev, top.left);
      try_add(top.left, l.next);
    }

    std::vector<int32_t> ids;
    for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) {
      const std::string_view piece =
          std::string_view(norm).substr(symbols[i].offset, symbols[i].length);
      const auto it = mergeable_.find(piece);
      if (it != mergeable_.end()) {
        ids.push_back(it->second);
        continue;
      }
      bool all_bytes = true;
      for (unsigned char b : piece) all_bytes = all_bytes && byte_ids_[b] >= 0;
      if (all_bytes) {
        for (unsigned char b : piece) ids.push_back(byte_ids_[b]);
      } else if (unk_ >= 0) {
        if (ids.empty() || ids.back() != unk_) ids.push_back(unk_);  // runs of unknowns merge
      } else {
        fail("text has a character the vocabulary cannot represent and there is no unknown token");
      }
    }
    return ids;
  }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> mergeable_;
  std::vector<std::string> user_defined_;
  int32_t byte_ids_[256];
  std::unordered_map<int32_t, uint8_t> byte_values_;  // byte token id -> its byte
  bool add_space_prefix_ = true;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& f) {
  return std::make_unique<SpmTokenizer>(f);
}

}  // namespace strata
