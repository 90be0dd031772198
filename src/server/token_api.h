// llama-server's /tokenize and /detokenize, as pure functions from a request body to its
// answer (the HTTP side only routes):
//   POST /tokenize {"content": TEXT, "add_special": false, "parse_special": true,
//                   "with_pieces": false}
//     -> {"tokens": [ids]}, or with pieces [{"id": ID, "piece": TEXT}], a piece that is not
//        valid UTF-8 on its own (a byte token, half a character) as its byte values [n, ...]
//   POST /detokenize {"tokens": [ids]} -> {"content": TEXT}
// add_special adds the model's BOS where the model adds one; parse_special turns control
// tokens written in the text ("<|im_end|>") into those tokens. Bad fields are ApiErrors (400)
// naming the field; ids outside the vocabulary are refused. The answer is written as JSON text
// directly (a document of a million {"id", "piece"} objects took 2.6 GB), after `reserve` has
// been asked for a bound on its bytes, and on what encoding the text holds, before each is
// held (it throws when they cannot be).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "model/tokenizer.h"

namespace strata {

using ReserveBytes = std::function<void(uint64_t bytes)>;
std::string tokenize_response(const Tokenizer& tokenizer, const nlohmann::json& body,
                              const ReserveBytes& reserve);
std::string detokenize_response(const Tokenizer& tokenizer, const nlohmann::json& body,
                                const ReserveBytes& reserve);
// The body's text as JSON (bounded depth and numbers); an ApiError (400) when it is not.
nlohmann::json parse_body(const std::string& text);

}  // namespace strata
