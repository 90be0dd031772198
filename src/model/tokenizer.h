// Tokenizers read from GGUF metadata (tokenizer.ggml.*):
//   model "llama": SentencePiece BPE with scores and <0xXX> byte fallback (tokenizer_spm.cpp)
//   model "gpt2":  byte-level BPE with merges and the GPT-2 pre-tokenizer (tokenizer_bpe.cpp)
//   model "gemma4": BPE with merges over UTF-8 characters, spaces as U+2581 (tokenizer_gemma4.cpp)
//   model "bert":  WordPiece, longest vocabulary entries first (tokenizer_wpm.cpp)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/gguf.h"

namespace strata {

// GGUF token types (tokenizer.ggml.token_type), the same numbers SentencePiece uses.
enum class TokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);

  // add_special: the vocabulary's BOS in front and EOS behind where it adds them
  // (add_bos_default, add_eos_default), as llama.cpp's tokenize with add_special.
  // parse_special: control and user-defined tokens written out in the text (e.g. "<|im_end|>"
  // in a chat prompt) become those tokens instead of being spelled with ordinary ones.
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special = false) const;
  // The bytes a token stands for in generated text (control tokens give nothing).
  virtual std::string token_bytes(int32_t id) const = 0;
  std::string decode(const std::vector<int32_t>& ids) const;
  // A lower bound on the tokens encode() makes of `text_bytes` bytes of text, known before
  // encoding (no token covers more input bytes than its piece has, or than one UTF-8
  // character for the unknown token): a server refuses a prompt that cannot fit its context
  // without tokenizing megabytes.
  int64_t min_tokens(size_t text_bytes) const {
    return static_cast<int64_t>((text_bytes + max_piece_bytes_ - 1) / max_piece_bytes_);
  }

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token_text(int32_t id) const { return tokens_.at(id); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  // Fill-in-the-middle tokens (llama-server's /infill): tokenizer.ggml.fim_pre/suf/mid_token_id,
  // else the token llama.cpp recognises by its text (<|fim_prefix|>, <fim-prefix>, <PRE>, ...);
  // -1 where there is none.
  struct FimTokens {
    int32_t pre = -1, suf = -1, mid = -1;
    bool complete() const { return pre >= 0 && suf >= 0 && mid >= 0; }
  };
  const FimTokens& fim() const { return fim_; }
  // Whether text is tokenized with BOS in front (EOS behind): tokenizer.ggml.add_bos_token
  // (add_eos_token), else the vocabulary's default (default_add_bos).
  bool add_bos_default() const { return add_bos_; }
  bool add_eos_default() const { return add_eos_; }
  bool is_control(int32_t id) const { return types_[id] == TokenType::Control; }
  // Whether the token stands for text when decoded (control and unused tokens do not).
  bool has_text(int32_t id) const {
    return types_[id] != TokenType::Control && types_[id] != TokenType::Unused;
  }
  virtual const char* kind() const = 0;

 protected:
  // The text's tokens without BOS/EOS.
  std::vector<int32_t> encode_body(std::string_view text, bool parse_special) const;
  // at_start: the text begins the input (SentencePiece adds its dummy space prefix only there).
  virtual std::vector<int32_t> encode_text(std::string_view text, bool at_start) const = 0;
  // Text decode() strips at the very start (SentencePiece's dummy space prefix).
  virtual bool strip_leading_space() const { return false; }

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t> token_ids_;
  // Control and user-defined tokens, longest text first: what encode takes whole.
  std::vector<int32_t> whole_tokens_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  FimTokens fim_;
  bool add_bos_ = true, add_eos_ = false;
  size_t max_piece_bytes_ = 4;  // the longest token text, and at least one UTF-8 character

  friend std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile&);
  friend std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile&);
  void load_common(const GgufFile& file);
};

std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& file);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& file);
std::unique_ptr<Tokenizer> make_gemma4_tokenizer(const GgufFile& file);
std::unique_ptr<Tokenizer> make_wpm_tokenizer(const GgufFile& file);

// A byte token's value: its text must be exactly "<0xHH>" (two hex digits). The value indexes
// a 256-entry byte table, so anything else in a file is refused, not parsed leniently.
uint8_t byte_token_value(const std::string& text, int32_t id, const std::string& path);
// A token's text with each U+2581 (the space mark of SentencePiece-style vocabularies) a space.
std::string with_spaces(std::string_view text);
// tokenizer.ggml.merges ("left right", by rank) as "left\nright" -> rank.
std::unordered_map<std::string, int32_t> read_merge_ranks(const GgufFile& file);

// llama.cpp's BOS default for a file without tokenizer.ggml.add_bos_token: SentencePiece
// ("llama") adds one; byte-level BPE ("gpt2") only for the pre-tokenizers of families trained
// with it (Llama 3's and its relatives, Tekken, Chameleon, Gemma 4, which adds it whatever the
// key says). Neither adds EOS by default.
bool default_add_bos(std::string_view model, std::string_view pre);
// Gemma 4's pre-tokenizer adds BOS even where its file says not to (llama.cpp's workaround).
bool forced_add_bos(std::string_view pre);
// Whether strata has the tokenizer model (tokenizer.ggml.model).
bool tokenizer_supported(std::string_view model);

}  // namespace strata
