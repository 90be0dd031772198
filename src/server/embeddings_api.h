// OpenAI's /v1/embeddings as pure functions from a request body to its inputs, and from the
// vectors to the answer (the HTTP side tokenizes, schedules and routes):
//   POST /v1/embeddings {"input": TEXT | [TEXT, ...] | [ID, ...] | [[ID, ...], ...],
//                        "model": NAME, "encoding_format": "float" | "base64",
//                        "dimensions": N (only the model's own), "user": TEXT}
//     -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] or
//         base64 of the float32 little-endian bytes}], "model": NAME,
//         "usage": {"prompt_tokens": N, "total_tokens": N}}
// Bad fields are ApiErrors (400) naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace strata {

inline constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request

struct EmbeddingRequest {
  // Each input as text or, where the request gave ids, as its tokens (then its text is empty).
  struct Input {
    std::string text;
    std::vector<int32_t> ids;
  };
  std::vector<Input> inputs;
  bool base64 = false;
};

// n_embd: the model's width (a `dimensions` other than it is refused: a decoder's hidden state
// cannot be shortened as OpenAI's v3 models' can); n_vocab bounds token ids.
EmbeddingRequest parse_embedding_request(const nlohmann::json& body, int64_t n_embd,
                                         int64_t n_vocab);

nlohmann::json embedding_response(std::span<const std::vector<float>> vectors, bool base64,
                                  const std::string& model, int64_t prompt_tokens);

}  // namespace strata
