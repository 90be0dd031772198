#include "model/model.h"

#include "core/error.h"

namespace strata {

std::unique_ptr<Model> Model::load(const std::string& path, bool require_tokenizer, LoadMode mode) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, mode);
  m->config = ModelConfig::from_gguf(*m->file);
  m->weights = load_weights(*m->file, m->config);
  if (require_tokenizer || m->file->find("tokenizer.ggml.model") != nullptr) {
    m->tokenizer = Tokenizer::from_gguf(*m->file);
    if (m->tokenizer->n_vocab() != m->config.n_vocab)
      fail("'{}': the tokenizer has {} tokens but the embedding has {} rows", path,
           m->tokenizer->n_vocab(), m->config.n_vocab);
  }
  return m;
}

}  // namespace strata
