#include "offline/hf_tokenizer.h"

#include <sentencepiece_processor.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"

namespace strata {

namespace {

GgufValue string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(GgufValue::str(s));
  return GgufValue::array(GgufType::String, std::move(items));
}

GgufMetadata from_sentencepiece(const std::string& path, int64_t bos_id, int64_t eos_id) {
  ::close(open_regular_file(path));  // sentencepiece would block on a FIFO
  sentencepiece::SentencePieceProcessor sp;
  const auto status = sp.Load(path);
  if (!status.ok()) fail("cannot read the SentencePiece model '{}': {}", path, status.ToString());
  const int n = sp.GetPieceSize();
  std::vector<std::string> tokens;
  std::vector<GgufValue> scores, types;
  for (int i = 0; i < n; ++i) {
    tokens.push_back(sp.IdToPiece(i));
    scores.push_back(GgufValue::f32(sp.GetScore(i)));
    int type = 1;  // normal
    if (sp.IsUnknown(i))
      type = 2;
    else if (sp.IsControl(i))
      type = 3;
    else if (sp.IsUnused(i))
      type = 5;
    else if (sp.IsByte(i))
      type = 6;
    types.push_back(GgufValue::i32(type));
  }
  // The dummy space prefix is a normalizer setting; it shows in how "a" is encoded.
  std::vector<std::string> pieces;
  sp.Encode("a", &pieces).IgnoreError();
  const bool space_prefix = !pieces.empty() && pieces[0].rfind("\xe2\x96\x81", 0) == 0;
  GgufMetadata m;
  m.emplace_back("tokenizer.ggml.model", GgufValue::str("llama"));
  m.emplace_back("tokenizer.ggml.tokens", string_array(tokens));
  m.emplace_back("tokenizer.ggml.scores", GgufValue::array(GgufType::F32, std::move(scores)));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  const int64_t bos = sp.bos_id() >= 0 ? sp.bos_id() : bos_id;
  const int64_t eos = sp.eos_id() >= 0 ? sp.eos_id() : eos_id;
  if (bos >= 0)
    m.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos)));
  if (eos >= 0)
    m.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(eos)));
  if (sp.unk_id() >= 0)
    m.emplace_back("tokenizer.ggml.unknown_token_id",
                   GgufValue::u32(static_cast<uint32_t>(sp.unk_id())));
  m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(bos >= 0));
  m.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(space_prefix));
  return m;
}

// tokenizer.json's parts, each checked for the JSON type it must have: a file that is not what
// Hugging Face writes is a one-line error naming the part, never an exception from the JSON
// library or an allocation sized by a number in the file.
struct BpeParts {
  std::vector<std::string> tokens;
  std::vector<GgufValue> types;
  std::vector<std::string> merges;
};

void read_vocab(const nlohmann::json& vocab, const std::string& path, int64_t n_vocab,
                BpeParts& b) {
  if (!vocab.is_object()) fail("'{}': model.vocab is not an object of piece: id", path);
  if (static_cast<int64_t>(vocab.size()) > n_vocab)
    fail("'{}' has {} tokens but vocab_size is {}", path, vocab.size(), n_vocab);
  b.tokens.assign(vocab.size(), std::string());
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer())
      fail("'{}': the id of token '{}' is {}, not a whole number", path, piece.substr(0, 64),
           id.dump());
    const int64_t i =
        id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX ? -1 : id.get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(b.tokens.size()))
      fail("'{}': token id {} is outside the vocabulary", path, id.dump());
    b.tokens[static_cast<size_t>(i)] = piece;
  }
  b.types.assign(b.tokens.size(), GgufValue::i32(1));
}

void read_added_tokens(const nlohmann::json& added, const std::string& path, int64_t n_vocab,
                       BpeParts& b) {
  if (added.is_null()) return;
  if (!added.is_array()) fail("'{}': added_tokens is not an array", path);
  for (size_t k = 0; k < added.size(); ++k) {
    const auto& t = added[k];
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string() ||
        (t.contains("special") && !t["special"].is_boolean()))
      fail(
          "'{}': added_tokens[{}] is not an object with an integer id, a string content and a "
          "boolean special",
          path, k);
    const auto& idv = t["id"];
    const int64_t id = idv.is_number_unsigned() && idv.get<uint64_t>() > INT64_MAX
                           ? INT64_MAX
                           : idv.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      fail("'{}': added token id {} is outside the vocabulary of {} (vocab_size)", path, idv.dump(),
           n_vocab);
    if (id >= static_cast<int64_t>(b.tokens.size())) {
      b.tokens.resize(static_cast<size_t>(id) + 1);
      b.types.resize(static_cast<size_t>(id) + 1, GgufValue::i32(1));
    }
    b.tokens[static_cast<size_t>(id)] = t["content"].get<std::string>();
    const bool special = t.contains("special") && t["special"].get<bool>();
    b.types[static_cast<size_t>(id)] = GgufValue::i32(special ? 3 : 4);
  }
}

void read_merges(const nlohmann::json& merges, const std::string& path, BpeParts& b) {
  if (merges.is_null()) return;
  if (!merges.is_array()) fail("'{}': model.merges is not an array", path);
  for (size_t k = 0; k < merges.size(); ++k) {
    const auto& mg = merges[k];
    if (mg.is_string())
      b.merges.push_back(mg.get<std::string>());
    else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
      b.merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
    else
      fail("'{}': model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", path, k);
  }
}

// The tokenizer.ggml.pre name of a tokenizer.json's pre-tokenizer: GPT-2's ByteLevel (its own
// regex), or the Split-then-ByteLevel sequence of Llama 3 and Qwen2, known by its regex; whether
// the BPE model takes a piece found whole in the vocabulary must be what that name implies.
std::string pretokenizer_name(const nlohmann::json& pre, bool ignore_merges,
                              const std::string& path) {
  static const char* kLlama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const char* kQwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const auto field = [](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) ? o[key] : nlohmann::json();
  };
  const auto type = field(pre, "type");
  std::string name;
  if (type == "ByteLevel" && field(pre, "use_regex") != false) {
    name = "gpt2";
  } else if (type == "Sequence") {
    const auto steps = field(pre, "pretokenizers");
    if (steps.is_array() && steps.size() == 2 && field(steps[0], "type") == "Split" &&
        field(steps[0], "behavior") == "Isolated" && field(steps[0], "invert") != true &&
        field(steps[1], "type") == "ByteLevel" && field(steps[1], "use_regex") == false) {
      const auto regex = field(field(steps[0], "pattern"), "Regex");
      if (regex == kLlama3) name = "llama-bpe";
      if (regex == kQwen2) name = "qwen2";
    }
  }
  if (name.empty())
    fail(
        "'{}': pre-tokenizer {} is not supported; strata converts GPT-2's ByteLevel and the "
        "Split patterns of Llama 3 and Qwen2",
        path, pre.dump().substr(0, 200));
  const bool implied = name == "llama-bpe";
  if (ignore_merges != implied)
    fail("'{}': model.ignore_merges is {} where the {} pre-tokenizer has {}", path, ignore_merges,
         name, implied);
  return name;
}

GgufMetadata from_tokenizer_json(const std::string& path, int64_t bos_id, int64_t eos_id,
                                 int64_t n_vocab) {
  const std::string text = read_regular_file(path, kMaxJsonFileBytes, "tokenizer.json");
  nlohmann::json j;
  try {
    j = parse_json_bounded(text, fmt::format("'{}'", path));
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("'{}' is not a JSON object", path);
  const auto part = [&](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) ? o[key] : nlohmann::json();
  };
  const auto model = part(j, "model");
  if (!model.is_object() || part(model, "type") != "BPE")
    fail("'{}': only BPE tokenizer.json files are supported (without a tokenizer.model)", path);
  const auto ignore = part(model, "ignore_merges");
  if (!ignore.is_null() && !ignore.is_boolean())
    fail("'{}': model.ignore_merges is not true or false", path);
  const std::string pre =
      pretokenizer_name(part(j, "pre_tokenizer"), ignore.is_boolean() && ignore.get<bool>(), path);
  BpeParts b;
  read_vocab(part(model, "vocab"), path, n_vocab, b);
  read_added_tokens(part(j, "added_tokens"), path, n_vocab, b);
  read_merges(part(model, "merges"), path, b);
  auto& tokens = b.tokens;
  auto& types = b.types;
  auto& merges = b.merges;
  GgufMetadata m;
  m.emplace_back("tokenizer.ggml.model", GgufValue::str("gpt2"));
  m.emplace_back("tokenizer.ggml.pre", GgufValue::str(pre));
  m.emplace_back("tokenizer.ggml.tokens", string_array(tokens));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue::array(GgufType::I32, std::move(types)));
  m.emplace_back("tokenizer.ggml.merges", string_array(merges));
  if (bos_id >= 0)
    m.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos_id)));
  if (eos_id >= 0)
    m.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(eos_id)));
  m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  return m;
}

}  // namespace

GgufMetadata read_hf_tokenizer(const std::string& dir, int64_t bos_id, int64_t eos_id,
                               int64_t n_vocab) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "tokenizer.model"))
    return from_sentencepiece((fs::path(dir) / "tokenizer.model").string(), bos_id, eos_id);
  if (fs::exists(fs::path(dir) / "tokenizer.json"))
    return from_tokenizer_json((fs::path(dir) / "tokenizer.json").string(), bos_id, eos_id,
                               n_vocab);
  fail("'{}' has neither tokenizer.model nor tokenizer.json", dir);
}

}  // namespace strata
