// GGUF files (versions 2 and 3, and PowerInfer's "PWRI" variant): metadata values, tensor
// infos, and a reader that validates every count, size and offset against the mapped file
// before anything uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "tensor/dtype.h"

namespace strata {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GgufType type);

// One metadata value. Integers keep their sign class; arrays hold items of one element type.
struct GgufValue {
  GgufType type = GgufType::U32;
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;
  GgufType array_type = GgufType::U8;
  std::vector<GgufValue> items;

  static GgufValue u32(uint32_t v) { return {GgufType::U32, uint64_t{v}, {}, {}}; }
  static GgufValue u64(uint64_t v) { return {GgufType::U64, v, {}, {}}; }
  static GgufValue i32(int32_t v) { return {GgufType::I32, int64_t{v}, {}, {}}; }
  static GgufValue f32(float v) { return {GgufType::F32, double{v}, {}, {}}; }
  static GgufValue boolean(bool v) { return {GgufType::Bool, v, {}, {}}; }
  static GgufValue str(std::string v) { return {GgufType::String, std::move(v), {}, {}}; }
  static GgufValue array(GgufType item_type, std::vector<GgufValue> values) {
    return {GgufType::Array, uint64_t{0}, item_type, std::move(values)};
  }

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  // Conversions fail with an error naming `key` when the type does not fit.
  int64_t as_int(const std::string& key) const;
  double as_float(const std::string& key) const;
  bool as_bool(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  std::string to_display(size_t max_items = 8) const;
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length (contiguous)
  uint64_t offset = 0;        // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t rows() const;  // product of dims[1..]
};

class GgufFile {
 public:
  // Maps and validates the file; throws Error naming the first problem found.
  static std::unique_ptr<GgufFile> open(const std::string& path, LoadMode mode = LoadMode::Map,
                                        const MappedFile::Ranges& holes = {});

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  bool is_powerinfer() const { return powerinfer_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return file_->size(); }
  uint64_t data_offset() const { return data_offset_; }
  const uint8_t* bytes() const { return file_->data(); }  // the whole file
  MappedFile& memory() { return *file_; }  // for in-place rearrangement at load (Read mode)
  const MappedFile& memory() const { return *file_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const GgufValue& get(const std::string& key) const;  // fails if missing
  int64_t get_int(const std::string& key) const { return get(key).as_int(key); }
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  void parse();

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  bool powerinfer_ = false;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace strata
