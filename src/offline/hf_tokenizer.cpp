#include "offline/hf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"

namespace strata {

namespace {

GgufValue string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(GgufValue::str(s));
  return GgufValue::array(GgufType::String, std::move(items));
}

GgufMetadata from_sentencepiece(const std::string& path, int64_t bos_id, int64_t eos_id) {
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

GgufMetadata from_tokenizer_json(const std::string& path, int64_t bos_id, int64_t eos_id) {
  const std::string text = read_regular_file(path, kMaxJsonFileBytes, "tokenizer.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", path, e.what());
  }
  const auto& model = j["model"];
  if (!model.is_object() || model.value("type", "") != "BPE")
    fail("'{}': only BPE tokenizer.json files are supported (without a tokenizer.model)", path);
  const auto& pre = j["pre_tokenizer"];
  const std::string pre_type = pre.is_object() ? pre.value("type", "") : "";
  if (pre_type != "ByteLevel")
    fail("'{}': pre-tokenizer '{}' is not supported; strata converts byte-level BPE", path,
         pre_type);
  const auto& vocab = model["vocab"];
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [piece, id] : vocab.items()) {
    const auto i = id.get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(tokens.size()))
      fail("'{}': token id {} is outside the vocabulary", path, i);
    tokens[i] = piece;
  }
  std::vector<GgufValue> types(tokens.size(), GgufValue::i32(1));
  if (j["added_tokens"].is_array()) {
    for (const auto& t : j["added_tokens"]) {
      const auto id = t.value("id", int64_t{-1});
      if (id < 0) continue;
      if (id >= static_cast<int64_t>(tokens.size())) {
        tokens.resize(id + 1);
        types.resize(id + 1, GgufValue::i32(1));
      }
      tokens[id] = t.value("content", "");
      types[id] = GgufValue::i32(t.value("special", false) ? 3 : 4);
    }
  }
  std::vector<std::string> merges;
  for (const auto& mg : model["merges"]) {
    if (mg.is_string())
      merges.push_back(mg.get<std::string>());
    else if (mg.is_array() && mg.size() == 2)
      merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
  }
  GgufMetadata m;
  m.emplace_back("tokenizer.ggml.model", GgufValue::str("gpt2"));
  m.emplace_back("tokenizer.ggml.pre", GgufValue::str("gpt2"));
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

GgufMetadata read_hf_tokenizer(const std::string& dir, int64_t bos_id, int64_t eos_id) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "tokenizer.model"))
    return from_sentencepiece((fs::path(dir) / "tokenizer.model").string(), bos_id, eos_id);
  if (fs::exists(fs::path(dir) / "tokenizer.json"))
    return from_tokenizer_json((fs::path(dir) / "tokenizer.json").string(), bos_id, eos_id);
  fail("'{}' has neither tokenizer.model nor tokenizer.json", dir);
}

}  // namespace strata
