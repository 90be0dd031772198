// How byte-level BPE files split text into pieces before merging (tokenizer.ggml.pre), as pure
// functions over byte ranges:
//   gpt2 (also 'default'): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//   ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ falcon (llama.cpp's): first runs of [\p{P}$+<=>^~|`]+ apart
//   from the rest, then GPT-2's
//     pattern inside each piece, then every [0-9]{3} from the left apart from the rest.
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3's tokenizer.json)
//   qwen2: the same with \p{N} one digit at a time
//   qwen35: qwen2's with marks in the letter runs ([\p{L}\p{M}]+) and out of the symbol runs
//   digits (starcoder, refact, command-r, ...): every \p{N} a piece of its own, then GPT-2's
//     pattern inside the rest
//   deepseek-coder, deepseek-llm: several regexes in sequence (pretokenize_deepseek.cpp)
// Pieces cover the text in order, none empty. The code point classes come from Python's regex
// module (unicode_tables.inc), which tools/reference/bpe_tokenizer.py checks against.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace strata {

enum class Pretokenizer {
  Gpt2,
  Falcon,
  Llama3,
  Qwen2,
  Qwen35,
  DigitsGpt2,
  DeepseekCoder,
  DeepseekLlm
};

// A file's tokenizer.ggml.pre as llama.cpp reads it: the split, and whether a piece whose bytes
// are one vocabulary entry is that token without merging (Hugging Face's ignore_merges, which
// Llama 3's tokenizer sets).
struct PretokenizerChoice {
  Pretokenizer kind = Pretokenizer::Gpt2;
  bool ignore_merges = false;
};

using Pieces = std::vector<std::pair<uint32_t, uint32_t>>;  // (byte offset, byte length)

std::optional<PretokenizerChoice> pretokenizer_from_name(std::string_view name);
const char* pretokenizer_names();  // for error messages
Pieces pretokenize(Pretokenizer kind, std::string_view text);

// DeepSeek's splits (pretokenize_deepseek.cpp), for pretokenize.
Pieces deepseek_coder_pieces(std::string_view text);
Pieces deepseek_llm_pieces(std::string_view text);

}  // namespace strata
