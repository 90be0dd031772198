#include "offline/hf_rope_scaling.h"

#include <cmath>
#include <set>

#include "core/error.h"

namespace strata {

namespace {

double number(const nlohmann::json& s, const std::string& key, double fallback,
              const std::string& where) {
  if (!s.contains(key) || s[key].is_null()) return fallback;
  if (!s[key].is_number()) fail("'{}': rope_scaling.{} is not a number", where, key);
  const double v = s[key].get<double>();
  if (!std::isfinite(v) || v <= 0.0)
    fail("'{}': rope_scaling.{} is {}; expected a positive number", where, key, v);
  return v;
}

// Llama 3's frequency divisors (Meta's apply_scaling, as llama.cpp's converter writes them): high
// frequencies kept, low ones divided by `factor`, a smooth blend between.
std::vector<float> llama3_divisors(const nlohmann::json& s, const std::string& where, double theta,
                                   int64_t head_dim) {
  const double factor = number(s, "factor", 8.0, where);
  const double low = number(s, "low_freq_factor", 1.0, where);
  const double high = number(s, "high_freq_factor", 4.0, where);
  const double old_ctx = number(s, "original_max_position_embeddings", 8192.0, where);
  if (high <= low)
    fail("'{}': rope_scaling.high_freq_factor {} is not above low_freq_factor {}", where, high,
         low);
  const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    // In float, as the converter's torch.float32 frequencies.
    const float freq = 1.0f / std::pow(static_cast<float>(theta),
                                       static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

void only_fields(const nlohmann::json& s, const std::set<std::string>& allowed,
                 const std::string& type, const std::string& where) {
  for (const auto& [key, value] : s.items())
    if (!allowed.count(key))
      fail("'{}': rope_scaling.{} ({} scaling) is not carried by strata convert", where,
           key.substr(0, 48), type);
}

// LongRoPE's two tables and the magnitude llama.cpp's converter gives them.
void read_longrope(const nlohmann::json& config, const nlohmann::json& s, const std::string& where,
                   int64_t n_rot, int64_t n_ctx_train, HfRopeScaling& out) {
  const auto table = [&](const char* key) {
    if (!s.contains(key) || !s[key].is_array() || s[key].size() != static_cast<size_t>(n_rot / 2))
      fail("'{}': rope_scaling.{} must be a list of {} numbers (rotary dimensions / 2)", where, key,
           n_rot / 2);
    std::vector<float> v;
    for (const auto& x : s[key]) {
      const double d = x.is_number() ? x.get<double>() : 0.0;
      if (!(d > 0.0) || !std::isfinite(d))
        fail("'{}': rope_scaling.{} holds {}; expected positive numbers", where, key, x.dump());
      v.push_back(static_cast<float>(d));
    }
    return v;
  };
  out.long_factors = table("long_factor");
  out.short_factors = table("short_factor");
  const double orig = number(s, "original_max_position_embeddings",
                             number(config, "original_max_position_embeddings", 0.0, where), where);
  if (orig <= 0.0 || orig > 4294967295.0 || orig != std::floor(orig))
    fail("'{}': LongRoPE needs original_max_position_embeddings (a whole number)", where);
  const double scale = static_cast<double>(n_ctx_train) / orig;
  out.scaling.attn_factor =
      scale > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(orig))) : 1.0f;
  out.scaling.n_ctx_orig = static_cast<int64_t>(orig);
}

}  // namespace

HfRopeScaling read_hf_rope_scaling(const nlohmann::json& config, const std::string& where,
                                   double rope_theta, int64_t n_rot, int64_t n_ctx_train,
                                   RopeTensorsAllowed allowed) {
  HfRopeScaling out;
  const char* key = config.contains("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!config.contains(key) || config[key].is_null()) return out;
  const nlohmann::json& s = config[key];
  if (!s.is_object()) fail("'{}': {} is not an object", where, key);
  const std::string type =
      s.contains("rope_type") && s["rope_type"].is_string()
          ? s["rope_type"].get<std::string>()
          : (s.contains("type") && s["type"].is_string() ? s["type"].get<std::string>()
                                                         : "default");
  const std::set<std::string> common = {"rope_type", "type", "rope_theta"};
  auto with = [&](std::set<std::string> more) {
    more.insert(common.begin(), common.end());
    return more;
  };
  if (type == "default") {
    only_fields(s, common, type, where);
  } else if (type == "linear") {
    only_fields(s, with({"factor"}), type, where);
    out.scaling.type = RopeScalingType::Linear;
    out.scaling.freq_scale = static_cast<float>(1.0 / number(s, "factor", 1.0, where));
  } else if (type == "yarn") {
    only_fields(s, with({"factor", "original_max_position_embeddings"}), type, where);
    out.scaling.type = RopeScalingType::Yarn;
    out.scaling.freq_scale = static_cast<float>(1.0 / number(s, "factor", 1.0, where));
    out.scaling.n_ctx_orig = static_cast<int64_t>(
        number(s, "original_max_position_embeddings", static_cast<double>(n_ctx_train), where));
  } else if (type == "llama3") {
    if (!allowed.rope_freqs)
      fail("'{}': rope_scaling llama3 belongs to LLaMA models (rope_freqs); this one is not",
           where);
    only_fields(
        s,
        with({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}),
        type, where);
    out.rope_freqs = llama3_divisors(s, where, rope_theta, n_rot);
  } else if (type == "longrope" || type == "su") {
    if (!allowed.factor_pair)
      fail(
          "'{}': rope_scaling {} belongs to Phi-3 models (rope_factors_long/short); this one is "
          "not",
          where, type);
    only_fields(s, with({"long_factor", "short_factor", "original_max_position_embeddings"}), type,
                where);
    read_longrope(config, s, where, n_rot, n_ctx_train, out);
  } else {
    fail("'{}': rope_scaling type '{}' is not supported (default, linear, yarn, llama3, longrope)",
         where, type.substr(0, 32));
  }
  return out;
}

}  // namespace strata
