#include "server/token_api.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_limits.h"
#include "server/openai_api.h"

namespace strata {

namespace {

using json = nlohmann::json;

bool flag(const json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false", key), key);
  return body[key].get<bool>();
}

// Whether `s` is whole UTF-8 (no stray continuation byte, no character cut short).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += len;
  }
  return true;
}

// A piece as JSON text: a string, or its byte values when it is not valid UTF-8 on its own.
void write_piece(const std::string& piece, std::string& out) {
  if (valid_utf8(piece)) {
    out += json(piece).dump();
    return;
  }
  out += '[';
  for (size_t i = 0; i < piece.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", static_cast<unsigned>(static_cast<unsigned char>(piece[i])));
  out += ']';
}

// What writing a piece may take at most: \u escapes (6 bytes a byte) or ", 255" a byte.
constexpr uint64_t kPieceBytesPerByte = 6;
constexpr uint64_t kTokenOverhead = 32;  // {"id": 123456789, "piece": } and the comma
// What encoding holds while it works, per byte of text: 7 MB of text peaked at 375 MB (the
// shipped model's tokenizer, `strata tokenize --batch`, /usr/bin/time's maximum RSS).
constexpr uint64_t kEncodeBytesPerTextByte = 52;

}  // namespace

json parse_body(const std::string& text) {
  try {
    return parse_json_bounded(text, "the request body");
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON ({})", e.what()));
  } catch (const Error& e) {  // nested too deep
    throw ApiError(400, e.what());
  }
}

std::string tokenize_response(const Tokenizer& tokenizer, const json& body, const ReserveBytes& reserve) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  if (!body.contains("content") || !body["content"].is_string())
    throw ApiError(400, "'content' must be a string", "content");
  const bool add_special = flag(body, "add_special", false);
  const bool parse_special = flag(body, "parse_special", true);
  const bool with_pieces = flag(body, "with_pieces", false);
  reserve(kEncodeBytesPerTextByte * body["content"].get_ref<const std::string&>().size());
  const std::vector<int32_t> ids =
      tokenizer.encode(body["content"].get<std::string>(),
                       add_special, parse_special);
  // The piece as it reads in text: a control token by its name (what parse_special reads).
  auto piece_of = [&](int32_t id) {
    return tokenizer.has_text(id) ? tokenizer.token_bytes(id) : tokenizer.token_text(id);
  };
  uint64_t bound = 16 + kTokenOverhead * ids.size();
  if (with_pieces)
    for (const int32_t id : ids) bound += kPieceBytesPerByte * piece_of(id).size();
  reserve(bound);
  std::string out = "{\"tokens\": [";
  out.reserve(bound);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    if (!with_pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    out += fmt::format("{{\"id\": {}, \"piece\": ", ids[i]);
    write_piece(piece_of(ids[i]), out);
    out += '}';
  }
  return out + "]}";
}

std::string detokenize_response(const Tokenizer& tokenizer, const json& body, const ReserveBytes& reserve) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  if (!body.contains("tokens") || !body["tokens"].is_array())
    throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  uint64_t bound = 32;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer.n_vocab())
      throw ApiError(400,
                     fmt::format("'tokens' holds {}, not a token id below {}", t.dump().substr(0, 32),
                                 tokenizer.n_vocab()),
                     "tokens");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    const int32_t id = ids.back();
    bound += 8 + kPieceBytesPerByte * (tokenizer.has_text(id) ? tokenizer.token_bytes(id) : tokenizer.token_text(id)).size();
  }
  reserve(bound);  // the text, then the text escaped
  return json{{"content", tokenizer.decode(ids)}}.dump();
}

}  // namespace strata
