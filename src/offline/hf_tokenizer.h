// Reads a Hugging Face model directory's tokenizer into GGUF tokenizer.ggml.* metadata:
// tokenizer.model (SentencePiece, read with Debian's libsentencepiece) as model "llama", or
// tokenizer.json with a byte-level BPE as model "gpt2".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"

namespace strata {

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// bos/eos ids from config.json (or -1) are used when the tokenizer does not name them.
// `n_vocab` (the checkpoint's embedding rows) bounds every token id the files name.
GgufMetadata read_hf_tokenizer(const std::string& dir, int64_t bos_id, int64_t eos_id,
                               int64_t n_vocab);

}  // namespace strata
