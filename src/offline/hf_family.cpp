#include "offline/hf_family.h"

namespace strata {

int64_t ConfigReader::whole(const char* key, int64_t lo, int64_t hi) const {
  if (!has(key)) fail("'{}' lacks '{}'", path_, key);
  return whole_or(key, lo, hi, 0);
}

int64_t ConfigReader::whole_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_[key];
  if (!v.is_number_integer()) fail("'{}': '{}' is {}, not a whole number", path_, key, v.dump());
  // nlohmann keeps non-negative numbers unsigned: above INT64_MAX is out of any range here.
  const bool huge = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX;
  if (huge || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    fail("'{}': '{}' = {} is outside [{}, {}]", path_, key, v.dump(), lo, hi);
  return v.get<int64_t>();
}

double ConfigReader::positive_or(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_[key];
  const double x = v.is_number() ? v.get<double>() : -1;
  if (!(x > 0) || !std::isfinite(x) || !std::isfinite(static_cast<float>(x)))
    fail("'{}': '{}' is {}, not a positive number", path_, key, v.dump());
  return x;
}

std::string ConfigReader::text_or(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_string()) fail("'{}': '{}' is {}, not a string", path_, key, j_[key].dump());
  return j_[key].get<std::string>();
}

bool ConfigReader::flag_or(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_boolean())
    fail("'{}': '{}' is {}, not true or false", path_, key, j_[key].dump());
  return j_[key].get<bool>();
}

std::vector<std::string> ConfigReader::texts_or_empty(const char* key) const {
  if (!has(key)) return {};
  const auto& v = j_[key];
  std::vector<std::string> out;
  if (v.is_array())
    for (const auto& x : v) {
      if (!x.is_string()) break;
      out.push_back(x.get<std::string>());
    }
  if (!v.is_array() || out.size() != v.size())
    fail("'{}': '{}' is {}, not a list of strings", path_, key, v.dump().substr(0, 64));
  return out;
}

int64_t ConfigReader::token_id(const char* key, int64_t n_vocab) const {
  if (!has(key) || j_[key].is_array()) return -1;
  return whole(key, 0, n_vocab - 1);
}

void read_common_sizes(const ConfigReader& r, HfConfig& c, const char* hidden, const char* layers,
                       const char* heads, const char* ff) {
  c.model.n_embd = r.whole(hidden, 1, kU32);
  c.model.n_layer = r.whole(layers, 1, kU32);
  c.model.n_head = r.whole(heads, 1, kU32);
  if (ff != nullptr) c.model.n_ff = r.whole(ff, 1, kU32);
  c.model.n_vocab = r.whole("vocab_size", 1, kU32);
  c.model.n_ctx_train = r.whole_or("max_position_embeddings", 1, kU32, 2048);
}

void head_dim_from_width(const ConfigReader& r, HfConfig& c) {
  if (c.model.n_embd % c.model.n_head != 0)
    fail("'{}': the hidden size {} is not divisible by {} heads", r.path(), c.model.n_embd,
         c.model.n_head);
  c.model.head_dim = c.model.n_embd / c.model.n_head;
}

}  // namespace strata
