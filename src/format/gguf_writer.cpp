#include "format/gguf_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/input_file.h"

namespace strata {

GgufWriter::GgufWriter(std::string path, uint64_t alignment)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), alignment_(alignment) {
  refuse_special_output(path_);  // rename() would replace a device node (as root: /dev/full)
  refuse_special_output(tmp_path_);
  if (alignment_ != 32) set("general.alignment", GgufValue::u32(static_cast<uint32_t>(alignment)));
}

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) std::fclose(out_);
  if (!finished_) ::unlink(tmp_path_.c_str());
}

void GgufWriter::erase(const std::string& key) {
  if (header_written_) fail("GGUF writer: metadata '{}' erased after data started", key);
  std::erase_if(kv_, [&](const auto& kv) { return kv.first == key; });
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  if (header_written_) fail("GGUF writer: metadata '{}' set after data started", key);
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> dims) {
  if (header_written_) fail("GGUF writer: tensor '{}' declared after data started", name);
  GgufTensorInfo t;
  t.name = name;
  t.type = type;
  t.dims = std::move(dims);
  t.n_elements = 1;
  for (int64_t d : t.dims) t.n_elements = checked_mul(t.n_elements, d, "tensor elements");
  t.n_bytes = row_bytes(type, t.dims[0]) * (t.n_elements / t.dims[0]);
  uint64_t offset = 0;
  if (!tensors_.empty()) {
    const auto& last = tensors_.back();
    offset = align_up(last.offset + last.n_bytes, alignment_, "tensor offset");
  }
  t.offset = offset;
  tensors_.push_back(std::move(t));
}

void GgufWriter::write_raw(const void* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, out_) != n)
    fail("cannot write '{}': {}", tmp_path_, std::strerror(errno));
  position_ += n;
}

namespace {
// Appends v's bytes. (resize + memcpy rather than insert of a byte range: GCC 12 cannot see
// that the range insert's reallocation is large enough and warns -Wstringop-overflow.)
template <typename T>
void put(std::vector<uint8_t>& buf, T v) {
  const size_t at = buf.size();
  buf.resize(at + sizeof(T));
  std::memcpy(buf.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& buf, const std::string& s) {
  put<uint64_t>(buf, s.size());
  buf.insert(buf.end(), s.begin(), s.end());
}
void put_value(std::vector<uint8_t>& buf, const GgufValue& v) {
  switch (v.type) {
    case GgufType::U8:
      put<uint8_t>(buf, static_cast<uint8_t>(v.as_int("u8")));
      break;
    case GgufType::I8:
      put<int8_t>(buf, static_cast<int8_t>(v.as_int("i8")));
      break;
    case GgufType::U16:
      put<uint16_t>(buf, static_cast<uint16_t>(v.as_int("u16")));
      break;
    case GgufType::I16:
      put<int16_t>(buf, static_cast<int16_t>(v.as_int("i16")));
      break;
    case GgufType::U32:
      put<uint32_t>(buf, static_cast<uint32_t>(v.as_int("u32")));
      break;
    case GgufType::I32:
      put<int32_t>(buf, static_cast<int32_t>(v.as_int("i32")));
      break;
    case GgufType::U64:
      put<uint64_t>(buf, std::get<uint64_t>(v.scalar));
      break;
    case GgufType::I64:
      put<int64_t>(buf, v.as_int("i64"));
      break;
    case GgufType::F32:
      put<float>(buf, static_cast<float>(v.as_float("f32")));
      break;
    case GgufType::F64:
      put<double>(buf, v.as_float("f64"));
      break;
    case GgufType::Bool:
      put<uint8_t>(buf, v.as_bool("bool") ? 1 : 0);
      break;
    case GgufType::String:
      put_string(buf, v.as_string("string"));
      break;
    case GgufType::Array:
      put<uint32_t>(buf, static_cast<uint32_t>(v.array_type));
      put<uint64_t>(buf, v.items.size());
      for (const auto& item : v.items) put_value(buf, item);
      break;
  }
}
}  // namespace

void GgufWriter::write_header() {
  out_ = std::fopen(tmp_path_.c_str(), "wb");
  if (out_ == nullptr) fail("cannot create '{}': {}", tmp_path_, std::strerror(errno));
  std::vector<uint8_t> buf;
  put<uint32_t>(buf, powerinfer_magic_ ? 0x49525750 : 0x46554747);  // "PWRI" or "GGUF"
  put<uint32_t>(buf, 3);
  put<uint64_t>(buf, tensors_.size());
  put<uint64_t>(buf, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(buf, key);
    put<uint32_t>(buf, static_cast<uint32_t>(value.type));
    put_value(buf, value);
  }
  for (const auto& t : tensors_) {
    put_string(buf, t.name);
    put<uint32_t>(buf, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(buf, static_cast<uint64_t>(d));
    put<uint32_t>(buf, static_cast<uint32_t>(t.type));
    put<uint64_t>(buf, t.offset);
  }
  buf.resize(align_up(buf.size(), alignment_, "header size"), 0);
  write_raw(buf.data(), buf.size());
  header_written_ = true;
}

void GgufWriter::write_tensor_data(std::span<const uint8_t> bytes) {
  if (!header_written_) write_header();
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) fail("GGUF writer: more tensor data than declared");
    const auto& t = tensors_[current_];
    const uint64_t take = std::min<uint64_t>(bytes.size(), t.n_bytes - current_written_);
    write_raw(bytes.data(), take);
    current_written_ += take;
    bytes = bytes.subspan(take);
    if (current_written_ == t.n_bytes) {
      ++current_;
      current_written_ = 0;
      // Every tensor's data padded to the alignment, the last one's too: llama.cpp's reader
      // reads the data section as the sum of the padded sizes and fails on a file cut short.
      static const uint8_t zeros[4096] = {};
      const uint64_t pad = align_up(position_, alignment_, "padding") - position_;
      write_raw(zeros, pad);
    }
  }
}

void GgufWriter::finish() {
  if (!header_written_) write_header();
  if (current_ != tensors_.size())
    fail("GGUF writer: tensor '{}' was declared but its data not written", tensors_[current_].name);
  if (std::fclose(out_) != 0) {
    out_ = nullptr;
    fail("cannot write '{}': {}", tmp_path_, std::strerror(errno));
  }
  out_ = nullptr;
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    fail("cannot rename '{}' to '{}': {}", tmp_path_, path_, std::strerror(errno));
  finished_ = true;
}

}  // namespace strata
