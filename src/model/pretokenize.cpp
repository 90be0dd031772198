#include "model/pretokenize.h"

#include "model/unicode.h"

namespace strata {

namespace {

// Splits text into pre-tokens (byte ranges) with the GPT-2 pattern.
Pieces gpt2_pieces(std::string_view text) {
  const auto cs = split_utf8(text);
  const size_t n = cs.size();
  Pieces out;
  auto cp = [&](size_t i) { return i < n ? cs[i].codepoint : 0xffffffffu; };
  auto letter = [&](size_t i) { return i < n && is_letter(cs[i].codepoint); };
  auto number = [&](size_t i) { return i < n && is_number(cs[i].codepoint); };
  auto space = [&](size_t i) { return i < n && is_space(cs[i].codepoint); };
  auto other = [&](size_t i) { return i < n && !letter(i) && !number(i) && !space(i); };
  auto emit = [&](size_t a, size_t b) {
    const uint32_t begin = cs[a].offset;
    const uint32_t end = b < n ? cs[b].offset : static_cast<uint32_t>(text.size());
    out.emplace_back(begin, end - begin);
  };
  size_t i = 0;
  while (i < n) {
    // Contractions.
    if (cp(i) == '\'') {
      const uint32_t a = cp(i + 1), b = cp(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        emit(i, i + 3);
        i += 3;
        continue;
      }
    }
    // Optional leading space, then a run of one class.
    const size_t j = cp(i) == ' ' ? i + 1 : i;
    size_t k = j;
    if (letter(j)) {
      while (letter(k)) ++k;
    } else if (number(j)) {
      while (number(k)) ++k;
    } else if (other(j)) {
      while (other(k)) ++k;
    }
    if (k > j) {
      emit(i, k);
      i = k;
      continue;
    }
    // Whitespace: a run not followed by non-space, else the run minus its last character.
    k = i;
    while (space(k)) ++k;
    if (k == n || k - i == 1) {
      emit(i, k);
      i = k;
    } else {
      emit(i, k - 1);
      i = k - 1;
    }
  }
  return out;
}

// Splits text with the pattern of Llama 3 (digit_run 3) and Qwen2 (digit_run 1), a regex whose
// alternatives are tried in order at each position (the first that matches wins):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,DIGITS}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// marks: Qwen3.5's variant, whose letter runs take marks too ([\p{L}\p{M}]+) and whose symbol
// runs do not ([^\s\p{L}\p{M}\p{N}]).
Pieces gpt4_pieces(std::string_view text, size_t digit_run, bool marks = false) {
  const auto cs = split_utf8(text);
  const size_t n = cs.size();
  Pieces out;
  auto cp = [&](size_t i) { return i < n ? cs[i].codepoint : 0xffffffffu; };
  auto lower = [&](size_t i) { return cp(i) < 128 ? cp(i) | 0x20u : cp(i); };  // ASCII only
  auto strict_letter = [&](size_t i) { return i < n && is_letter(cs[i].codepoint); };
  auto mark = [&](size_t i) { return marks && i < n && is_mark(cs[i].codepoint); };
  auto letter = [&](size_t i) { return strict_letter(i) || mark(i); };
  auto number = [&](size_t i) { return i < n && is_number(cs[i].codepoint); };
  auto space = [&](size_t i) { return i < n && is_space(cs[i].codepoint); };
  auto newline = [&](size_t i) { return cp(i) == '\r' || cp(i) == '\n'; };
  auto other = [&](size_t i) { return i < n && !letter(i) && !number(i) && !space(i); };
  auto emit = [&](size_t a, size_t b) {
    const uint32_t begin = cs[a].offset;
    const uint32_t end = b < n ? cs[b].offset : static_cast<uint32_t>(text.size());
    out.emplace_back(begin, end - begin);
  };
  // The length of the match at i (at least 1: the last alternative takes any whitespace, and
  // every other character starts one of the earlier ones).
  auto match = [&](size_t i) -> size_t {
    if (cp(i) == '\'') {  // contractions, either case
      const uint32_t a = lower(i + 1), b = lower(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    // One optional character that is no letter, number or line break, then letters.
    size_t k = !letter(i) && !number(i) && !newline(i) && letter(i + 1) ? i + 1 : i;
    if (letter(k)) {
      while (letter(k)) ++k;
      return k - i;
    }
    if (number(i)) {
      k = i;
      while (k - i < digit_run && number(k)) ++k;
      return k - i;
    }
    // An optional space, symbols, then any line breaks.
    k = cp(i) == ' ' && other(i + 1) ? i + 1 : i;
    if (other(k)) {
      while (other(k)) ++k;
      while (newline(k)) ++k;
      return k - i;
    }
    // Whitespace up to and including its last line break.
    size_t end = i;
    while (space(end)) ++end;
    for (size_t j = end; j > i; --j)
      if (newline(j - 1)) return j - i;
    // Whitespace not followed by a non-space: the run at the end, else the run but its last
    // character (which then starts the next piece); a single one before text is itself.
    if (end == n || end - i == 1) return end - i;
    return end - 1 - i;
  };
  for (size_t i = 0; i < n;) {
    const size_t len = match(i);
    emit(i, i + len);
    i += len;
  }
  return out;
}

// Falcon's first split: runs of \p{P} and $+<=>^~|` (as llama.cpp's falcon pre-tokenizer).
bool falcon_symbol(uint32_t cp) {
  switch (cp) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
    case '`':
      return true;
    default:
      return is_punctuation(cp);
  }
}

bool ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// Splits each piece at the runs `in_run` marks: a run and the text between runs are pieces.
template <typename InRun>
Pieces split_runs(std::string_view text, const Pieces& pieces, InRun&& in_run) {
  Pieces out;
  for (const auto& [offset, length] : pieces) {
    const auto cs = split_utf8(text.substr(offset, length));
    size_t start = 0;
    for (size_t i = 1; i <= cs.size(); ++i)
      if (i == cs.size() || in_run(cs[i].codepoint) != in_run(cs[start].codepoint)) {
        const uint32_t end = i == cs.size() ? length : cs[i].offset;
        out.emplace_back(offset + cs[start].offset, end - cs[start].offset);
        start = i;
      }
  }
  return out;
}

// Splits each piece at every three ASCII digits in a row, from the left: the triples and the
// text between them are pieces.
Pieces split_digit_triples(std::string_view text, const Pieces& pieces) {
  Pieces out;
  for (const auto& [offset, length] : pieces) {
    const std::string_view p = text.substr(offset, length);
    uint32_t gap = 0;
    for (uint32_t i = 0; i + 3 <= length;) {
      if (ascii_digit(p[i]) && ascii_digit(p[i + 1]) && ascii_digit(p[i + 2])) {
        if (i > gap) out.emplace_back(offset + gap, i - gap);
        out.emplace_back(offset + i, 3);
        i += 3;
        gap = i;
      } else {
        ++i;
      }
    }
    if (gap < length) out.emplace_back(offset + gap, length - gap);
  }
  return out;
}

// Every \p{N} a piece of its own, then GPT-2's pattern inside the text between them (llama.cpp's
// "\p{N}" split before GPT-2's regex: StarCoder, Refact, Command-R and others).
Pieces digit_gpt2_pieces(std::string_view text) {
  if (text.empty()) return {};
  const Pieces runs = split_runs(text, {{0, static_cast<uint32_t>(text.size())}}, is_number);
  Pieces out;
  for (const auto& [offset, length] : runs) {
    const auto cs = split_utf8(text.substr(offset, length));
    if (is_number(cs[0].codepoint)) {
      for (const Utf8Char& c : cs) out.emplace_back(offset + c.offset, c.length);
      continue;
    }
    for (const auto& [o, l] : gpt2_pieces(text.substr(offset, length)))
      out.emplace_back(offset + o, l);
  }
  return out;
}

Pieces falcon_pieces(std::string_view text) {
  if (text.empty()) return {};
  const Pieces runs = split_runs(text, {{0, static_cast<uint32_t>(text.size())}}, falcon_symbol);
  Pieces words;
  for (const auto& [offset, length] : runs)
    for (const auto& [o, l] : gpt2_pieces(text.substr(offset, length)))
      words.emplace_back(offset + o, l);
  return split_digit_triples(text, words);
}

}  // namespace

std::optional<PretokenizerChoice> pretokenizer_from_name(std::string_view name) {
  // The names llama.cpp's converter writes for each pattern (llama-vocab.cpp), and whether its
  // tokenizer takes a piece found whole in the vocabulary as it is.
  struct Name {
    const char* name;
    Pretokenizer kind;
    bool ignore_merges;
  };
  static const Name kNames[] = {
      {"default", Pretokenizer::Gpt2, false},
      {"gpt2", Pretokenizer::Gpt2, false},
      {"gpt-2", Pretokenizer::Gpt2, false},
      {"falcon", Pretokenizer::Falcon, false},
      {"llama3", Pretokenizer::Llama3, true},
      {"llama-v3", Pretokenizer::Llama3, true},
      {"llama-bpe", Pretokenizer::Llama3, true},
      {"falcon3", Pretokenizer::Llama3, true},
      {"dbrx", Pretokenizer::Llama3, false},
      {"smaug-bpe", Pretokenizer::Llama3, false},
      {"qwen2", Pretokenizer::Qwen2, false},
      {"deepseek-r1-qwen", Pretokenizer::Qwen2, false},
      {"stablelm2", Pretokenizer::Qwen2, false},
      {"megrez", Pretokenizer::Qwen2, false},
      {"qwen35", Pretokenizer::Qwen35, false},
      {"mpt", Pretokenizer::Gpt2, false},
      {"olmo", Pretokenizer::Gpt2, false},
      {"jais", Pretokenizer::Gpt2, false},
      {"trillion", Pretokenizer::Gpt2, false},
      {"starcoder", Pretokenizer::DigitsGpt2, false},
      {"refact", Pretokenizer::DigitsGpt2, false},
      {"command-r", Pretokenizer::DigitsGpt2, false},
      {"smollm", Pretokenizer::DigitsGpt2, false},
      {"codeshell", Pretokenizer::DigitsGpt2, false},
      {"minerva-7b", Pretokenizer::DigitsGpt2, false},
      {"deepseek-coder", Pretokenizer::DeepseekCoder, false},
      {"deepseek-llm", Pretokenizer::DeepseekLlm, false},
  };
  for (const auto& n : kNames)
    if (name == n.name) return PretokenizerChoice{n.kind, n.ignore_merges};
  return std::nullopt;
}

const char* pretokenizer_names() {
  return "'default', 'gpt2', 'gpt-2', 'mpt', 'olmo', 'jais' and 'trillion' (GPT-2's pattern), "
         "'falcon', 'llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'dbrx' and 'smaug-bpe' (Llama "
         "3's), 'qwen2', 'deepseek-r1-qwen', 'stablelm2' and 'megrez' (Qwen2's), 'qwen35', "
         "'starcoder', 'refact', 'command-r', 'smollm', 'codeshell' and 'minerva-7b' (digits, "
         "then GPT-2's), 'deepseek-coder', 'deepseek-llm'";
}

Pieces pretokenize(Pretokenizer kind, std::string_view text) {
  switch (kind) {
    case Pretokenizer::Falcon:
      return falcon_pieces(text);
    case Pretokenizer::Llama3:
      return gpt4_pieces(text, 3);
    case Pretokenizer::Qwen2:
      return gpt4_pieces(text, 1);
    case Pretokenizer::Qwen35:
      return gpt4_pieces(text, 1, /*marks=*/true);
    case Pretokenizer::DigitsGpt2:
      return digit_gpt2_pieces(text);
    case Pretokenizer::DeepseekCoder:
      return deepseek_coder_pieces(text);
    case Pretokenizer::DeepseekLlm:
      return deepseek_llm_pieces(text);
    case Pretokenizer::Gpt2:
      break;
  }
  return gpt2_pieces(text);
}

}  // namespace strata
