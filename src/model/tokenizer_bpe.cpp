// Byte-level BPE (GPT-2 style): text is split into pieces by the file's pre-tokenizer
// (model/pretokenize.h: GPT-2's pattern, Falcon's, Llama 3's or Qwen2's), each piece's bytes are
// mapped to printable code points (GPT-2's bytes_to_unicode), and pairs are merged by merge rank,
// lowest first.
#include <fmt/format.h>

#include <queue>

#include "core/error.h"
#include "model/pretokenize.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace strata {

namespace {

// GPT-2's reversible byte -> code point map: printable Latin-1 bytes map to themselves, the
// rest to 256, 257, ... in byte order.
struct ByteMap {
  std::string byte_to_text[256];
  std::unordered_map<uint32_t, uint8_t> codepoint_to_byte;
  ByteMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      byte_to_text[b] = encode_utf8(cp);
      codepoint_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(const GgufFile& f) {
    load_common(f);
    const std::string pre = f.get_string("tokenizer.ggml.pre", "default");
    const auto split = pretokenizer_from_name(pre);
    if (!split)
      fail("'{}' uses pre-tokenizer '{}'; strata supports {}", f.path(), pre.substr(0, 64),
           pretokenizer_names());
    split_ = split->kind;
    ignore_merges_ = split->ignore_merges;
    ranks_ = read_merge_ranks(f);
  }

  const char* kind() const override { return "gpt2 (byte-level BPE)"; }

  std::string token_bytes(int32_t id) const override {
    std::string out;
    for (const auto& c : split_utf8(tokens_[id])) {
      const auto it = byte_map().codepoint_to_byte.find(c.codepoint);
      if (it != byte_map().codepoint_to_byte.end())
        out += static_cast<char>(it->second);
      else
        out += tokens_[id].substr(c.offset, c.length);  // added tokens are plain text
    }
    return out;
  }

 protected:
  std::vector<int32_t> encode_text(std::string_view text, bool /*at_start*/) const override {
    std::vector<int32_t> ids;
    for (const auto& [offset, length] : pretokenize(split_, text))
      encode_piece(text.substr(offset, length), ids);
    return ids;
  }

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
    std::vector<std::string> symbols;
    for (unsigned char b : piece) symbols.push_back(byte_map().byte_to_text[b]);
    if (ignore_merges_) {
      std::string whole;
      for (const auto& s : symbols) whole += s;
      if (const auto it = token_ids_.find(whole); it != token_ids_.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    // Merge the lowest-ranked adjacent pair (leftmost on ties) until none is a merge.
    for (;;) {
      int32_t best_rank = INT32_MAX;
      size_t best = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = ranks_.find(symbols[i] + '\n' + symbols[i + 1]);
        if (it != ranks_.end() && it->second < best_rank) {
          best_rank = it->second;
          best = i;
        }
      }
      if (best_rank == INT32_MAX) break;
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const auto& s : symbols) {
      const auto it = token_ids_.find(s);
      if (it != token_ids_.end()) {
        ids.push_back(it->second);
      } else if (unk_ >= 0) {
        ids.push_back(unk_);
      } else {
        fail("byte-level BPE produced '{}', which is not in the vocabulary", s);
      }
    }
  }

  std::unordered_map<std::string, int32_t> ranks_;
  Pretokenizer split_ = Pretokenizer::Gpt2;
  bool ignore_merges_ = false;  // a piece found whole in the vocabulary is that token
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& f) {
  return std::make_unique<BpeTokenizer>(f);
}

}  // namespace strata
