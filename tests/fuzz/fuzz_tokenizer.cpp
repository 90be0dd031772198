// Both tokenizers (SentencePiece BPE with byte fallback, byte-level BPE) on arbitrary text,
// with and without special-token parsing: ids stay in the vocabulary, and decoding what was
// encoded gives the text back for the byte-level one (every byte has a token).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "format/gguf.h"
#include "model/tokenizer.h"

#ifndef STRATA_SOURCE_DIR
#error "STRATA_SOURCE_DIR names the repository (for tests/data)"
#endif

namespace {

struct Tokenizers {
  std::unique_ptr<strata::GgufFile> spm_file, bpe_file;
  std::unique_ptr<strata::Tokenizer> spm, bpe;
};

Tokenizers load() {
  Tokenizers t;
  const std::string data = std::string(STRATA_SOURCE_DIR) + "/tests/data/";
  t.spm_file = strata::GgufFile::open(data + "spm-tokenizer.gguf");
  t.bpe_file = strata::GgufFile::open(data + "gpt2-tokenizer.gguf");
  t.spm = strata::Tokenizer::from_gguf(*t.spm_file);
  t.bpe = strata::Tokenizer::from_gguf(*t.bpe_file);
  return t;
}

void check(const strata::Tokenizer& tok, const std::string& text, bool special) {
  const auto ids = tok.encode(text, true, special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  tok.decode(ids);
  if (static_cast<int64_t>(ids.size()) + 1 < tok.min_tokens(text.size())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers t = load();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool special : {false, true}) {
    check(*t.spm, text, special);
    check(*t.bpe, text, special);
  }
  // Byte-level BPE loses nothing: every byte sequence comes back as it was.
  const auto ids = t.bpe->encode(text, false, false);
  if (t.bpe->decode(ids) != text) std::abort();
  return 0;
}
