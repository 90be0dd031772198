// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4"), as llama.cpp v0.5.0 runs it: BPE merges
// over the text's UTF-8 characters (not GPT-2's byte map), spaces written as U+2581 first, the
// text cut only into runs of line breaks and runs of the rest (a run of line breaks that is one
// vocabulary entry is that token), the adjacent pair of lowest merge rank merged first (leftmost
// on ties), and a symbol left outside the vocabulary spelled by its <0xXX> byte tokens.
#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace strata {

namespace {


class Gemma4Tokenizer : public Tokenizer {
 public:
  explicit Gemma4Tokenizer(const GgufFile& f) {
    load_common(f);
    ranks_ = read_merge_ranks(f);
    for (int32_t id = 0; id < n_vocab(); ++id)
      if (types_[id] == TokenType::Byte)
        byte_values_.emplace(id, byte_token_value(tokens_[id], id, f.path()));
  }

  const char* kind() const override { return "gemma4 (BPE over UTF-8)"; }

  std::string token_bytes(int32_t id) const override {
    if (const auto it = byte_values_.find(id); it != byte_values_.end())
      return std::string(1, static_cast<char>(it->second));
    return with_spaces(tokens_[id]);
  }

 protected:
  std::vector<int32_t> encode_text(std::string_view text, bool /*at_start*/) const override {
    std::string escaped;
    for (char c : text) escaped += c == ' ' ? kSpaceMark : std::string(1, c);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < escaped.size();) {
      const bool breaks = escaped[i] == '\n';
      size_t j = i;
      while (j < escaped.size() && (escaped[j] == '\n') == breaks) ++j;
      const std::string_view run(escaped.data() + i, j - i);
      const auto whole = breaks ? token_ids_.find(std::string(run)) : token_ids_.end();
      if (whole != token_ids_.end())
        ids.push_back(whole->second);
      else
        merge_run(run, ids);
      i = j;
    }
    return ids;
  }

 private:
  struct Symbol {
    size_t begin, length;
    int prev, next;
  };
  struct Pair {
    int32_t rank;
    int left, right;
    size_t length;  // of the merged text, to tell a pair made stale by other merges
    bool operator<(const Pair& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };

  void merge_run(std::string_view run, std::vector<int32_t>& ids) const {
    std::vector<Symbol> sym;
    for (const Utf8Char& c : split_utf8(run))
      sym.push_back(
          {c.offset, c.length, static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1});
    if (sym.empty()) return;
    sym.back().next = -1;
    std::priority_queue<Pair> queue;
    const auto text = [&](int s) { return run.substr(sym[s].begin, sym[s].length); };
    const auto offer = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const auto it = ranks_.find(std::string(text(left)) + '\n' + std::string(text(right)));
      if (it != ranks_.end())
        queue.push({it->second, left, right, sym[left].length + sym[right].length});
    };
    for (size_t s = 0; s + 1 < sym.size(); ++s) offer(static_cast<int>(s), static_cast<int>(s) + 1);
    while (!queue.empty()) {
      const Pair p = queue.top();
      queue.pop();
      Symbol &l = sym[p.left], &r = sym[p.right];
      if (l.length == 0 || r.length == 0 || l.next != p.right || l.length + r.length != p.length)
        continue;
      l.length += r.length;
      r.length = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = p.left;
      offer(l.prev, p.left);
      offer(p.left, l.next);
    }
    for (int s = 0; s >= 0; s = sym[s].next) {
      const std::string piece(text(s));
      if (const auto it = token_ids_.find(piece); it != token_ids_.end()) {
        ids.push_back(it->second);
        continue;
      }
      for (unsigned char b : piece)  // llama.cpp skips a byte without its token
        if (const auto it = token_ids_.find(fmt::format("<0x{:02X}>", b)); it != token_ids_.end())
          ids.push_back(it->second);
    }
  }

  std::unordered_map<std::string, int32_t> ranks_;
  std::unordered_map<int32_t, uint8_t> byte_values_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_gemma4_tokenizer(const GgufFile& f) {
  return std::make_unique<Gemma4Tokenizer>(f);
}

}  // namespace strata
