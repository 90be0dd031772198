#include "model/model.h"

#include "core/error.h"
#include "model/down_transpose.h"

namespace strata {

std::unique_ptr<Model> Model::load(const std::string& path, bool require_tokenizer, LoadMode mode) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, LoadMode::Map);
  // A bundled file stays mapped: its FFN bundles are read on demand (flash tier), never
  // loaded whole; everything else pages in as used.
  if (mode == LoadMode::Read && m->file->find(kBundleBytesKey) == nullptr)
    m->file = GgufFile::open(path, mode);
  m->config = ModelConfig::from_gguf(*m->file);
  m->weights = load_weights(*m->file, m->config);
  // "none" / "no_vocab" (llama.cpp's names) mark a file without a vocabulary, such as
  // strata synth's benchmark models.
  const std::string vocab = m->file->get_string("tokenizer.ggml.model", "");
  const bool has_vocab = !vocab.empty() && vocab != "none" && vocab != "no_vocab";
  if (require_tokenizer && !has_vocab)
    fail("'{}' has no tokenizer (tokenizer.ggml.model is {})", path,
         vocab.empty() ? "missing" : "'" + vocab + "'");
  if (has_vocab) {
    m->tokenizer = Tokenizer::from_gguf(*m->file);
    if (m->tokenizer->n_vocab() != m->config.n_vocab)
      fail("'{}': the tokenizer has {} tokens but the embedding has {} rows", path,
           m->tokenizer->n_vocab(), m->config.n_vocab);
  }
  return m;
}

uint64_t Model::ensure_down_t() {
  uint64_t bytes = 0;
  for (LayerWeights& l : weights.layers) {
    if (l.ffn_down_t.data != nullptr) continue;
    derived_.emplace_back();
    l.ffn_down_t = transpose_down(l.ffn_down, derived_.back());
    bytes += derived_.back().size();
  }
  weights.has_down_t = true;
  return bytes;
}

}  // namespace strata
