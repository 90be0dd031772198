#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "format/gguf.h"

namespace strata {

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8:
      return "u8";
    case GgufType::I8:
      return "i8";
    case GgufType::U16:
      return "u16";
    case GgufType::I16:
      return "i16";
    case GgufType::U32:
      return "u32";
    case GgufType::I32:
      return "i32";
    case GgufType::F32:
      return "f32";
    case GgufType::Bool:
      return "bool";
    case GgufType::String:
      return "string";
    case GgufType::Array:
      return "array";
    case GgufType::U64:
      return "u64";
    case GgufType::I64:
      return "i64";
    case GgufType::F64:
      return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  return type != GgufType::Array &&
         (std::holds_alternative<uint64_t>(scalar) || std::holds_alternative<int64_t>(scalar));
}

int64_t GgufValue::as_int(const std::string& key) const {
  if (type != GgufType::Array) {
    if (const auto* u = std::get_if<uint64_t>(&scalar)) {
      if (*u > static_cast<uint64_t>(INT64_MAX)) fail("metadata key '{}' is too large", key);
      return static_cast<int64_t>(*u);
    }
    if (const auto* i = std::get_if<int64_t>(&scalar)) return *i;
  }
  fail("metadata key '{}' should be an integer but is {}", key, gguf_type_name(type));
}

double GgufValue::as_float(const std::string& key) const {
  if (const auto* d = std::get_if<double>(&scalar)) return *d;
  if (is_integer()) return static_cast<double>(as_int(key));
  fail("metadata key '{}' should be a number but is {}", key, gguf_type_name(type));
}

bool GgufValue::as_bool(const std::string& key) const {
  if (const auto* b = std::get_if<bool>(&scalar)) return *b;
  fail("metadata key '{}' should be a bool but is {}", key, gguf_type_name(type));
}

const std::string& GgufValue::as_string(const std::string& key) const {
  if (type == GgufType::String) return std::get<std::string>(scalar);
  fail("metadata key '{}' should be a string but is {}", key, gguf_type_name(type));
}

std::string GgufValue::to_display(size_t max_items) const {
  if (type == GgufType::Array) {
    std::string out = fmt::format("[{} x {}]", items.size(), gguf_type_name(array_type));
    if (max_items == 0) return out;
    out += " [";
    for (size_t i = 0; i < items.size() && i < max_items; ++i)
      out += (i ? ", " : "") + items[i].to_display(0);
    if (items.size() > max_items) out += ", ...";
    return out + "]";
  }
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          std::string s = v.size() > 80 ? v.substr(0, 80) + "..." : v;
          std::string esc;
          for (char ch : s) esc += (ch == '\n') ? std::string("\\n") : std::string(1, ch);
          return "\"" + esc + "\"";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else {
          return fmt::format("{}", v);
        }
      },
      scalar);
}

}  // namespace strata
