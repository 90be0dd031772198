#include "model/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "model/unicode.h"

namespace strata {

void Tokenizer::load_common(const GgufFile& f) {
  const GgufValue& tokens = f.get("tokenizer.ggml.tokens");
  if (tokens.type != GgufType::Array || tokens.array_type != GgufType::String)
    fail("'{}': tokenizer.ggml.tokens is not an array of strings", f.path());
  if (tokens.items.empty()) fail("'{}': tokenizer.ggml.tokens is empty", f.path());
  tokens_.reserve(tokens.items.size());
  for (const auto& t : tokens.items) {
    tokens_.push_back(t.as_string("tokenizer.ggml.tokens"));
    max_piece_bytes_ = std::max(max_piece_bytes_, tokens_.back().size());
  }
  types_.assign(tokens_.size(), TokenType::Normal);
  if (const GgufValue* types = f.find("tokenizer.ggml.token_type")) {
    if (types->type != GgufType::Array || types->items.size() != tokens_.size())
      fail("'{}': tokenizer.ggml.token_type does not have one entry per token", f.path());
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const int64_t t = types->items[i].as_int("tokenizer.ggml.token_type");
      if (t < 1 || t > 6) fail("'{}': token {} has unknown token type {}", f.path(), i, t);
      types_[i] = static_cast<TokenType>(t);
    }
  }
  for (size_t i = 0; i < tokens_.size(); ++i)
    token_ids_.emplace(tokens_[i], static_cast<int32_t>(i));
  for (int32_t id = 0; id < n_vocab(); ++id)
    if ((types_[id] == TokenType::UserDefined || types_[id] == TokenType::Control) &&
        !tokens_[id].empty())
      whole_tokens_.push_back(id);
  std::stable_sort(whole_tokens_.begin(), whole_tokens_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  auto special = [&](const char* key) -> int32_t {
    const int64_t id = f.get_int(key, -1);
    if (id < -1 || id >= static_cast<int64_t>(tokens_.size()))
      fail("'{}': {} = {} is not a token id (vocabulary has {})", f.path(), key, id,
           tokens_.size());
    return static_cast<int32_t>(id);
  };
  bos_ = special("tokenizer.ggml.bos_token_id");
  eos_ = special("tokenizer.ggml.eos_token_id");
  unk_ = special("tokenizer.ggml.unknown_token_id");
  // llama.cpp's keys, then the texts its vocabulary loader looks for when they are absent.
  const auto fim = [&](const char* key, std::initializer_list<const char*> texts) {
    int32_t id = special(key);
    for (const char* t : texts)
      if (id < 0)
        if (const auto it = token_ids_.find(t); it != token_ids_.end()) id = it->second;
    return id;
  };
  fim_.pre = fim("tokenizer.ggml.fim_pre_token_id",
                 {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>"});
  fim_.suf = fim("tokenizer.ggml.fim_suf_token_id",
                 {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>"});
  fim_.mid = fim("tokenizer.ggml.fim_mid_token_id",
                 {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"});
  const std::string model = f.get_string("tokenizer.ggml.model", "");
  const std::string pre = f.get_string("tokenizer.ggml.pre", "");
  add_bos_ = default_add_bos(model, pre);
  if (const GgufValue* v = f.find("tokenizer.ggml.add_bos_token"))
    add_bos_ = v->as_bool("tokenizer.ggml.add_bos_token") || forced_add_bos(pre);
  if (const GgufValue* v = f.find("tokenizer.ggml.add_eos_token"))
    add_eos_ = v->as_bool("tokenizer.ggml.add_eos_token");
  if (bos_ < 0) add_bos_ = false;
  if (eos_ < 0) add_eos_ = false;
}

std::string with_spaces(std::string_view t) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    if (t.substr(i, kSpaceMark.size()) == kSpaceMark) {
      out += ' ';
      i += kSpaceMark.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

bool forced_add_bos(std::string_view pre) {
  return pre == "gemma4";
}

bool default_add_bos(std::string_view model, std::string_view pre) {
  if (model == "llama") return true;
  if (model != "gpt2" && model != "gemma4") return false;  // the BPE models
  constexpr std::string_view kWithBos[] = {"llama3",       "llama-v3", "llama-bpe", "falcon3",
                                           "falcon-h1",    "pixtral",  "midm-2.0",  "lfm2",
                                           "jina-v5-nano", "tekken",   "chameleon"};
  for (std::string_view p : kWithBos)
    if (pre == p) return true;
  return forced_add_bos(pre);
}

bool tokenizer_supported(std::string_view model) {
  return model == "llama" || model == "gpt2" || model == "gemma4" || model == "bert";
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

uint8_t byte_token_value(const std::string& text, int32_t id, const std::string& path) {
  const int hi = text.size() == 6 ? hex_digit(text[3]) : -1;
  const int lo = text.size() == 6 ? hex_digit(text[4]) : -1;
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>' || hi < 0 || lo < 0)
    fail("'{}': token {} has type byte but its text '{}' is not <0xHH> (two hex digits)", path, id,
         text.substr(0, 32));
  return static_cast<uint8_t>(hi * 16 + lo);
}

std::unordered_map<std::string, int32_t> read_merge_ranks(const GgufFile& f) {
  const GgufValue& merges = f.get("tokenizer.ggml.merges");
  if (merges.type != GgufType::Array || merges.array_type != GgufType::String)
    fail("'{}': tokenizer.ggml.merges is not an array of strings", f.path());
  std::unordered_map<std::string, int32_t> ranks;
  for (size_t r = 0; r < merges.items.size(); ++r) {
    const std::string& m = merges.items[r].as_string("tokenizer.ggml.merges");
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) fail("'{}': merge {} ('{}') has no space", f.path(), r, m);
    ranks.emplace(m.substr(0, sp) + '\n' + m.substr(sp + 1), static_cast<int32_t>(r));
  }
  return ranks;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model", "");
  if (model == "llama") return make_spm_tokenizer(f);
  if (model == "gpt2") return make_bpe_tokenizer(f);
  if (model == "gemma4") return make_gemma4_tokenizer(f);
  if (model == "bert") return make_wpm_tokenizer(f);
  if (model.empty()) fail("'{}' has no tokenizer (tokenizer.ggml.model is missing)", f.path());
  fail("'{}' has tokenizer model '{}'; strata supports: llama, gpt2, gemma4, bert", f.path(),
       model);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> ids = encode_body(text, parse_special);
  if (add_special && add_bos_) ids.insert(ids.begin(), bos_);
  if (add_special && add_eos_) ids.push_back(eos_);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_body(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  auto add_text = [&](std::string_view piece, bool at_start) {
    const auto body = encode_text(piece, at_start);
    ids.insert(ids.end(), body.begin(), body.end());
  };
  // Special tokens by text, longest first (whole_tokens_), so "<|im_start|>" wins over a
  // shorter prefix. As in llama.cpp (and Hugging Face's tokenizers), user-defined tokens (added
  // tokens such as GPT-NeoX's runs of spaces) are always taken whole; control tokens only when
  // parse_special.
  const auto taken = [&](int32_t id) {
    return parse_special || types_[id] == TokenType::UserDefined;
  };
  if (std::none_of(whole_tokens_.begin(), whole_tokens_.end(), taken)) {
    add_text(text, true);
    return ids;
  }
  size_t start = 0;  // of the text not yet encoded
  for (size_t i = 0; i < text.size();) {
    int32_t found = -1;
    for (int32_t id : whole_tokens_)
      if (taken(id) && text.compare(i, tokens_[id].size(), tokens_[id]) == 0) {
        found = id;
        break;
      }
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > start) add_text(text.substr(start, i - start), start == 0);
    ids.push_back(found);
    i += tokens_[found].size();
    start = i;
  }
  if (start < text.size()) add_text(text.substr(start), start == 0);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) fail("token id {} is outside the vocabulary", id);
    if (!has_text(id)) continue;
    std::string piece = token_bytes(id);
    if (first && strip_leading_space() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

}  // namespace strata
