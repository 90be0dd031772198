#include <fmt/format.h>

#include <cstring>

#include "core/checked_math.h"
#include "core/error.h"
#include "format/gguf.h"

namespace strata {

namespace {

constexpr uint32_t kMagicGguf = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMagicPwri = 0x49525750;  // "PWRI"
constexpr uint64_t kMaxDims = 4;
constexpr uint64_t kMaxArrayDepth = 4;

// Bounds-checked cursor over the mapped header. Every read names what it was reading so a
// truncated or corrupt file is reported precisely.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail("'{}' is truncated: {} needs {} bytes at offset {}, but the file has {} bytes", path_,
           what, n, pos_, size_);
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

uint64_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
    case GgufType::String:  // length prefix
      return 8;
    case GgufType::Array:  // element type + count
      return 12;
  }
  return 1;
}

GgufType read_type(Cursor& c, const std::string& key) {
  const uint32_t t = c.read<uint32_t>("a metadata value type");
  if (t > static_cast<uint32_t>(GgufType::F64))
    fail("'{}': metadata key '{}' has unknown value type {}", c.path(), key, t);
  return static_cast<GgufType>(t);
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, uint64_t depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::U8:
      v.scalar = uint64_t{c.read<uint8_t>("a u8 value")};
      break;
    case GgufType::I8:
      v.scalar = int64_t{c.read<int8_t>("an i8 value")};
      break;
    case GgufType::U16:
      v.scalar = uint64_t{c.read<uint16_t>("a u16 value")};
      break;
    case GgufType::I16:
      v.scalar = int64_t{c.read<int16_t>("an i16 value")};
      break;
    case GgufType::U32:
      v.scalar = uint64_t{c.read<uint32_t>("a u32 value")};
      break;
    case GgufType::I32:
      v.scalar = int64_t{c.read<int32_t>("an i32 value")};
      break;
    case GgufType::U64:
      v.scalar = c.read<uint64_t>("a u64 value");
      break;
    case GgufType::I64:
      v.scalar = c.read<int64_t>("an i64 value");
      break;
    case GgufType::F32:
      v.scalar = double{c.read<float>("an f32 value")};
      break;
    case GgufType::F64:
      v.scalar = c.read<double>("an f64 value");
      break;
    case GgufType::Bool: {
      const uint8_t b = c.read<uint8_t>("a bool value");
      if (b > 1) fail("'{}': metadata key '{}' has bool value {}", c.path(), key, b);
      v.scalar = b != 0;
      break;
    }
    case GgufType::String:
      v.scalar = c.read_string("a string value");
      break;
    case GgufType::Array: {
      if (depth >= kMaxArrayDepth)
        fail("'{}': metadata key '{}' nests arrays too deeply", c.path(), key);
      v.array_type = read_type(c, key);
      const uint64_t count = c.read<uint64_t>("an array length");
      // Each element takes at least min_encoded_size bytes: an absurd count fails here,
      // before any allocation.
      if (count > c.remaining() / min_encoded_size(v.array_type))
        fail(
            "'{}' is truncated or corrupt: metadata key '{}' claims {} array elements, more "
            "than the remaining {} bytes can hold",
            c.path(), key, count, c.remaining());
      v.items.reserve(count);
      for (uint64_t i = 0; i < count; ++i)
        v.items.push_back(read_value(c, v.array_type, key, depth + 1));
      break;
    }
  }
  return v;
}

}  // namespace

void GgufFile::parse() {
  const std::string& path = file_->path();
  Cursor c(file_->data(), file_->size(), path);
  if (file_->size() < 4) fail("'{}' is not a GGUF file: only {} bytes", path, file_->size());
  const uint32_t magic = c.read<uint32_t>("the magic");
  if (magic == kMagicPwri) {
    powerinfer_ = true;
  } else if (magic != kMagicGguf) {
    fail("'{}' is not a GGUF file (magic {:08x}, expected 'GGUF' or 'PWRI')", path, magic);
  }
  version_ = c.read<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    fail("'{}' has GGUF version {}; strata reads versions 2 and 3", path, version_);
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  // A tensor info takes at least 8+4+8+4+8 bytes and a key/value at least 8+4+1.
  if (n_tensors > c.remaining() / 32)
    fail("'{}' claims {} tensors, more than the file can describe", path, n_tensors);
  if (n_kv > c.remaining() / 13)
    fail("'{}' claims {} metadata entries, more than the file can hold", path, n_kv);

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("a metadata key");
    const GgufType type = read_type(c, key);
    GgufValue value = read_value(c, type, key, 0);
    if (kv_index_.count(key)) fail("'{}': metadata key '{}' appears twice", path, key);
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = find("general.alignment")) {
    const int64_t align = a->as_int("general.alignment");
    if (align <= 0 || align > (1 << 20) || (align & (align - 1)) != 0)
      fail("'{}': general.alignment is {}, not a power of two", path, align);
    alignment_ = static_cast<uint64_t>(align);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("a tensor name");
    const uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      fail("'{}': tensor '{}' has {} dimensions (1 to {} allowed)", path, t.name, n_dims, kMaxDims);
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>("a tensor dimension");
      if (dim == 0 || dim > (uint64_t{1} << 40))
        fail("'{}': tensor '{}' has dimension {} = {}", path, t.name, d, dim);
      t.dims.push_back(static_cast<int64_t>(dim));
      t.n_elements = checked_mul(t.n_elements, dim, "a tensor's element count");
    }
    const uint32_t type_id = c.read<uint32_t>("a tensor type");
    const auto info = dtype_info(type_id);
    if (!info) fail("'{}': tensor '{}' has unknown type id {}", path, t.name, type_id);
    t.type = info->type;
    if (t.dims[0] % info->block_size != 0)
      fail("'{}': tensor '{}' row length {} is not a multiple of the {} block size {}", path,
           t.name, t.dims[0], info->name, info->block_size);
    t.n_bytes = checked_mul(t.n_elements / info->block_size, info->block_bytes, "tensor size");
    t.offset = c.read<uint64_t>("a tensor offset");
    if (t.offset % alignment_ != 0)
      fail("'{}': tensor '{}' offset {} is not aligned to {}", path, t.name, t.offset, alignment_);
    if (tensor_index_.count(t.name)) fail("'{}': tensor '{}' appears twice", path, t.name);
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  data_offset_ = align_up(c.pos(), alignment_, "the data section offset");
  if (data_offset_ > file_->size() && !tensors_.empty())
    fail("'{}' is truncated: the tensor data section would start at byte {}, past the end ({})",
         path, data_offset_, file_->size());
  const uint64_t data_size = file_->size() > data_offset_ ? file_->size() - data_offset_ : 0;
  for (auto& t : tensors_) {
    const uint64_t end = checked_add(t.offset, t.n_bytes, "a tensor's end offset");
    if (end > data_size)
      fail("'{}': tensor '{}' ({} bytes at data offset {}) extends past the end of the file", path,
           t.name, t.n_bytes, t.offset);
    t.data = file_->data() + data_offset_ + t.offset;
  }
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, LoadMode mode,
                                         const MappedFile::Ranges& holes) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->file_ = std::make_unique<MappedFile>(path, mode, holes);
  f->parse();
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail("'{}' lacks the metadata key '{}'", path(), key);
  return *v;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_int(key) : fallback;
}

double GgufFile::get_float(const std::string& key, double fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_float(key) : fallback;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  const GgufValue* v = find(key);
  return v ? v->as_string(key) : fallback;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace strata

namespace strata {

int64_t GgufTensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

}  // namespace strata
