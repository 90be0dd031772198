// BERT's WordPiece tokenizer (tokenizer.ggml.model "bert"), as llama.cpp v0.5.0 runs it: the text
// normalized (NFD's first code point and no marks when accents are stripped, lowercase), split at
// whitespace, every punctuation mark, ASCII symbol and CJK ideograph its own word; each word,
// with U+2581 in front, cut greedily into the longest vocabulary entries from the left (the
// converter wrote word starts with U+2581 and continuations bare, where Hugging Face writes
// "##"); a word with a piece outside the vocabulary is the unknown token. [CLS] in front and [SEP]
// behind with add_special.
#include "core/error.h"
#include "model/tokenizer.h"
#include "model/unicode.h"

namespace strata {

namespace {


// llama.cpp's whitespace set (Unicode's White_Space property).
bool wpm_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}
// \p{S} below 0x7F.
bool ascii_symbol(uint32_t cp) {
  return cp < 0x7F &&
         std::string_view("$+<=>^`|~").find(static_cast<char>(cp)) != std::string_view::npos;
}
// The CJK ideograph blocks BERT splits one by one (with Hugging Face's 0x2B920 for 0x2B820).
bool cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

class WordPieceTokenizer : public Tokenizer {
 public:
  explicit WordPieceTokenizer(const GgufFile& f) {
    load_common(f);
    auto id_or = [&](const char* key, int32_t current, int32_t fallback) {
      const int64_t id = current >= 0 ? current : f.get_int(key, fallback);
      if (id < 0 || id >= n_vocab())
        fail("'{}': {} = {} is not a token id (vocabulary has {})", f.path(), key, id, n_vocab());
      return static_cast<int32_t>(id);
    };
    // BERT's defaults where the file names none: [CLS] 101, [SEP] 102, [UNK] 100.
    bos_ = id_or("tokenizer.ggml.cls_token_id", bos_, 101);
    eos_ = id_or("tokenizer.ggml.seperator_token_id", -1, 102);
    unk_ = id_or("tokenizer.ggml.unknown_token_id", unk_, 100);
    add_bos_ = f.find("tokenizer.ggml.add_bos_token") == nullptr ||
               f.find("tokenizer.ggml.add_bos_token")->as_bool("tokenizer.ggml.add_bos_token");
    add_eos_ = true;  // llama.cpp's add_sep
    lowercase_ =
        f.find("tokenizer.ggml.normalizer.lowercase") == nullptr ||
        f.get("tokenizer.ggml.normalizer.lowercase").as_bool("tokenizer.ggml.normalizer.lowercase");
    strip_accents_ = lowercase_;
    if (const GgufValue* v = f.find("tokenizer.ggml.normalizer.strip_accents"))
      strip_accents_ = v->as_bool("tokenizer.ggml.normalizer.strip_accents");
  }

  const char* kind() const override { return "bert (WordPiece)"; }

  std::string token_bytes(int32_t id) const override {
    return with_spaces(tokens_[id]);
  }

 protected:
  std::vector<int32_t> encode_text(std::string_view text, bool /*at_start*/) const override {
    std::vector<int32_t> ids;
    for (const std::string& word : words(text)) add_word(word, ids);
    return ids;
  }

 private:
  // The normalized text cut into words.
  std::vector<std::string> words(std::string_view text) const {
    std::vector<std::string> out(1);
    for (const Utf8Char& c : split_utf8(text)) {
      const uint32_t cp = strip_accents_ ? nfd_first(c.codepoint) : c.codepoint;
      if (wpm_whitespace(cp)) {
        if (!out.back().empty()) out.emplace_back();
        continue;
      }
      // (strata::is_control is the code point class; the member of that name reads token ids.)
      if (cp == 0 || cp == 0xFFFD || strata::is_control(cp) || (strip_accents_ && is_mark(cp)))
        continue;
      const std::string s = encode_utf8(lowercase_ ? to_lower(cp) : cp);
      if (is_punctuation(cp) || ascii_symbol(cp) || cjk_ideograph(cp)) {
        if (!out.back().empty()) out.emplace_back();
        out.back() = s;
        out.emplace_back();
      } else {
        out.back() += s;
      }
    }
    if (out.back().empty()) out.pop_back();
    return out;
  }

  // One word's pieces, longest first from the left; the unknown token if any piece is missing.
  void add_word(const std::string& word, std::vector<int32_t>& ids) const {
    const std::string w = kSpaceMark + word;
    const size_t start = ids.size();
    for (size_t i = 0; i < w.size();) {
      size_t j = std::min(w.size(), i + max_piece_bytes_);
      for (; j > i; --j)
        if (const auto it = token_ids_.find(w.substr(i, j - i)); it != token_ids_.end()) {
          ids.push_back(it->second);
          break;
        }
      if (j == i) {
        ids.resize(start);
        break;
      }
      i = j;
    }
    if (ids.size() == start) ids.push_back(unk_);
  }

  bool lowercase_ = true, strip_accents_ = true;
};

}  // namespace

std::unique_ptr<Tokenizer> make_wpm_tokenizer(const GgufFile& f) {
  return std::make_unique<WordPieceTokenizer>(f);
}

}  // namespace strata
