#include "server/embeddings_api.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "core/base64.h"
#include "server/openai_api.h"

namespace strata {

using nlohmann::json;

namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

std::vector<int32_t> embedding_ids(const json& list, const std::string& where, int64_t n_vocab) {
  std::vector<int32_t> ids;
  for (const json& t : list) {
    if (!t.is_number_integer())
      refuse("input", fmt::format("'{}' must hold only token ids (integers)", where));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      refuse("input", fmt::format("'{}' has token id {}, outside the vocabulary (0..{})", where, id,
                               n_vocab - 1));
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) refuse("input", fmt::format("'{}' is empty", where));
  return ids;
}

std::vector<EmbeddingRequest::Input> embedding_inputs(const json& input, int64_t n_vocab) {
  std::vector<EmbeddingRequest::Input> inputs;
  auto text = [&](const json& s, const std::string& where) {
    if (s.get_ref<const std::string&>().empty()) refuse("input", fmt::format("'{}' is empty", where));
    inputs.push_back({s.get<std::string>(), {}});
  };
  if (input.is_string()) {
    text(input, "input");
    return inputs;
  }
  if (!input.is_array() || input.empty())
    refuse("input", "'input' must be a string, an array of strings, an array of token ids or an "
                 "array of such arrays, and not empty");
  if (input.size() > kMaxEmbeddingInputs)
    refuse("input", fmt::format("'input' has {} items; at most {} per request", input.size(),
                             kMaxEmbeddingInputs));
  if (input[0].is_number()) {  // one input as token ids
    inputs.push_back({"", embedding_ids(input, "input", n_vocab)});
    return inputs;
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string where = fmt::format("input[{}]", i);
    if (input[i].is_string())
      text(input[i], where);
    else if (input[i].is_array())
      inputs.push_back({"", embedding_ids(input[i], where, n_vocab)});
    else
      refuse("input", fmt::format("'{}' must be a string or an array of token ids", where));
  }
  return inputs;
}

}  // namespace

EmbeddingRequest parse_embedding_request(const json& body, int64_t n_embd, int64_t n_vocab) {
  if (!body.is_object()) refuse("", "the request body must be a JSON object");
  if (!body.contains("input")) refuse("input", "'input' is required");
  EmbeddingRequest r;
  r.inputs = embedding_inputs(body["input"], n_vocab);
  if (body.contains("model") && !body["model"].is_null() && !body["model"].is_string())
    refuse("model", "'model' must be a string");
  if (body.contains("user") && !body["user"].is_null() && !body["user"].is_string())
    refuse("user", "'user' must be a string");
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      refuse("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    r.base64 = f == "base64";
  }
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    const json& d = body["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() != n_embd)
      refuse("dimensions", fmt::format("'dimensions' can only be the model's own, {}: its "
                                    "embeddings cannot be shortened",
                                    n_embd));
  }
  return r;
}

json embedding_response(std::span<const std::vector<float>> vectors, bool base64,
                        const std::string& model, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json e = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian");
      const auto* bytes = reinterpret_cast<const uint8_t*>(vectors[i].data());
      e["embedding"] = base64_encode({bytes, vectors[i].size() * sizeof(float)});
    } else {
      e["embedding"] = vectors[i];
    }
    data.push_back(std::move(e));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace strata
