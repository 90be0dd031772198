#include "format/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "tensor/half.h"

namespace strata {

const char* safe_dtype_name(SafeDType t) {
  switch (t) {
    case SafeDType::F32:
      return "F32";
    case SafeDType::F16:
      return "F16";
    case SafeDType::BF16:
      return "BF16";
  }
  return "?";
}

namespace {
uint64_t dtype_size(SafeDType t) {
  return t == SafeDType::F32 ? 4 : 2;
}
}  // namespace

uint64_t SafeTensor::n_elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::make_unique<SafetensorsFile>();
  f->file_ = std::make_unique<MappedFile>(path);
  const uint64_t size = f->file_->size();
  if (size < 8) fail("'{}' is not a safetensors file: only {} bytes", path, size);
  uint64_t header_len;
  std::memcpy(&header_len, f->file_->data(), 8);
  if (header_len > size - 8)
    fail("'{}' is truncated: its header claims {} bytes, the file has {}", path, header_len, size);
  nlohmann::json header;
  try {
    header = parse_json_bounded(
        std::string_view(reinterpret_cast<const char*>(f->file_->data()) + 8, header_len),
        fmt::format("the header of '{}'", path));
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' has a corrupt safetensors header: {}", path, e.what());
  }
  if (!header.is_object()) fail("'{}' has a safetensors header that is not a JSON object", path);
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    SafeTensor t;
    t.name = name;
    try {
      const std::string dtype = info.at("dtype").get<std::string>();
      if (dtype == "F32")
        t.dtype = SafeDType::F32;
      else if (dtype == "F16")
        t.dtype = SafeDType::F16;
      else if (dtype == "BF16")
        t.dtype = SafeDType::BF16;
      else
        fail("'{}': tensor '{}' has dtype {}; strata converts F32, F16 and BF16", path, name,
             dtype);
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      const auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
        fail("'{}': tensor '{}' has data offsets outside the file", path, name);
      uint64_t expected = dtype_size(t.dtype);
      for (int64_t d : t.shape) {
        if (d < 0) fail("'{}': tensor '{}' has a negative dimension", path, name);
        expected = checked_mul(expected, static_cast<uint64_t>(d), "a safetensors tensor size");
      }
      t.n_bytes = offsets[1] - offsets[0];
      if (t.n_bytes != expected)
        fail("'{}': tensor '{}' holds {} bytes but its dtype and shape need {}", path, name,
             t.n_bytes, expected);
      t.data = f->file_->data() + data_start + offsets[0];
    } catch (const nlohmann::json::exception& e) {
      fail("'{}': tensor '{}' has a malformed header entry: {}", path, name, e.what());
    }
    f->tensors_.emplace(name, std::move(t));
  }
  return f;
}

void safetensor_to_f32(const SafeTensor& t, uint64_t offset, uint64_t n, float* out) {
  switch (t.dtype) {
    case SafeDType::F32:
      std::memcpy(out, t.data + offset * 4, n * 4);
      return;
    case SafeDType::F16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + (offset + i) * 2, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case SafeDType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + (offset + i) * 2, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
  }
}

}  // namespace strata
