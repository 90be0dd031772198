#include "format/imatrix_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"

namespace strata {

namespace {

// A cursor over the legacy file's bytes that fails instead of reading past the end.
class LegacyReader {
 public:
  explicit LegacyReader(const MappedFile& f) : f_(f) {}
  bool done() const { return at_ == f_.size(); }
  int32_t i32(const char* what) {
    int32_t v = 0;
    std::memcpy(&v, take(4, what), 4);
    return v;
  }
  const uint8_t* take(uint64_t n, const char* what) {
    if (n > f_.size() - at_)
      fail("'{}': legacy imatrix file ends inside {} (at byte {})", f_.path(), what, at_);
    const uint8_t* p = f_.data() + at_;
    at_ += n;
    return p;
  }

 private:
  const MappedFile& f_;
  uint64_t at_ = 0;
};

Imatrix read_legacy(const MappedFile& f) {
  LegacyReader in(f);
  Imatrix m;
  m.legacy = true;
  const int32_t n = in.i32("the entry count");
  if (n < 1) fail("'{}': imatrix file has no entries ({})", f.path(), n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t len = in.i32("an entry's name length");
    if (len < 1 || len > 4096) fail("'{}': entry {} has a name of {} bytes", f.path(), i, len);
    const auto* name = reinterpret_cast<const char*>(in.take(static_cast<uint64_t>(len), "a name"));
    const int32_t calls = in.i32("an entry's call count");
    const int32_t values = in.i32("an entry's value count");
    if (values < 1) fail("'{}': entry {} has {} values", f.path(), i, values);
    ImatrixEntry e;
    e.sums.resize(static_cast<size_t>(values));
    std::memcpy(e.sums.data(), in.take(uint64_t{4} * static_cast<uint64_t>(values), "values"),
                e.sums.size() * 4);
    e.counts = {static_cast<float>(calls)};
    m.entries[std::string(name, static_cast<size_t>(len))] = std::move(e);
  }
  if (!in.done()) {  // the optional trailer: chunk count and dataset name
    m.chunk_count = in.i32("the chunk count");
    const int32_t len = in.i32("the dataset name length");
    if (len > 0 && len <= 1 << 20)
      m.datasets.emplace_back(
          reinterpret_cast<const char*>(in.take(static_cast<uint64_t>(len), "the dataset name")),
          static_cast<size_t>(len));
  }
  return m;
}

std::vector<float> f32_values(const GgufTensorInfo& t, const std::string& path) {
  if (t.type != DType::F32) fail("'{}': imatrix tensor '{}' is not F32", path, t.name);
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

Imatrix read_gguf(const std::string& path) {
  const auto f = GgufFile::open(path);
  Imatrix m;
  if (const GgufValue* d = f->find("imatrix.datasets"))
    for (const GgufValue& s : d->items) m.datasets.push_back(s.as_string("imatrix.datasets"));
  m.chunk_count = f->get_int("imatrix.chunk_count", 0);
  m.chunk_size = f->get_int("imatrix.chunk_size", 0);
  for (const GgufTensorInfo& t : f->tensors()) {
    for (const std::string suffix : {".in_sum2", ".counts"}) {
      if (!t.name.ends_with(suffix)) continue;
      ImatrixEntry& e = m.entries[t.name.substr(0, t.name.size() - suffix.size())];
      (suffix == ".counts" ? e.counts : e.sums) = f32_values(t, path);
    }
  }
  if (m.entries.empty()) fail("'{}': no importance matrices (<tensor>.in_sum2) in the file", path);
  for (const auto& [name, e] : m.entries) {
    if (e.sums.empty() || e.counts.empty())
      fail("'{}': '{}' needs both .in_sum2 and .counts", path, name);
    if (e.sums.size() % e.counts.size() != 0)
      fail("'{}': '{}' has {} sums for {} counts", path, name, e.sums.size(), e.counts.size());
  }
  return m;
}

}  // namespace

std::vector<float> Imatrix::importance(const std::string& tensor) const {
  const auto it = entries.find(tensor);
  if (it == entries.end()) return {};
  const ImatrixEntry& e = it->second;
  std::vector<float> out(e.sums.size());
  const size_t per = e.sums.size() / e.counts.size();
  for (size_t j = 0; j < e.counts.size(); ++j) {
    const float count = e.counts[j];
    for (size_t i = 0; i < per; ++i) {
      const float s = e.sums[j * per + i];
      out[j * per + i] = legacy ? (count > 0 ? s / count : s) : (count > 0 ? s / count : 1.0f);
    }
  }
  return out;
}

Imatrix read_imatrix(const std::string& path) {
  const MappedFile f(path);
  if (f.size() >= 4 && std::memcmp(f.data(), "GGUF", 4) == 0) return read_gguf(path);
  return read_legacy(f);
}

void write_imatrix(const std::string& path, const Imatrix& m) {
  GgufWriter w(path);
  w.set("general.type", GgufValue::str("imatrix"));
  std::vector<GgufValue> datasets;
  for (const std::string& d : m.datasets) datasets.push_back(GgufValue::str(d));
  w.set("imatrix.datasets", GgufValue::array(GgufType::String, datasets));
  w.set("imatrix.chunk_count", GgufValue::u32(static_cast<uint32_t>(m.chunk_count)));
  w.set("imatrix.chunk_size", GgufValue::u32(static_cast<uint32_t>(m.chunk_size)));
  for (const auto& [name, e] : m.entries) {
    const auto n_mat = static_cast<int64_t>(e.counts.size());
    w.add_tensor(name + ".in_sum2", DType::F32,
                 {static_cast<int64_t>(e.sums.size()) / n_mat, n_mat});
    w.add_tensor(name + ".counts", DType::F32, {1, n_mat});
  }
  for (const auto& [name, e] : m.entries) {
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(e.sums.data()), e.sums.size() * 4});
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(e.counts.data()), e.counts.size() * 4});
  }
  w.finish();
}

namespace {
void put_i32(std::ofstream& out, int64_t v) {
  const auto w = static_cast<int32_t>(v);
  out.write(reinterpret_cast<const char*>(&w), 4);
}
}  // namespace

void write_imatrix_legacy(const std::string& path, const Imatrix& m) {
  const int64_t calls = std::max<int64_t>(1, m.chunk_count);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write '{}'", tmp);
    put_i32(out, static_cast<int64_t>(m.entries.size()));
    for (const auto& [name, e] : m.entries) {
      if (e.counts.size() != 1)
        fail("'{}' has {} experts: the legacy imatrix format holds one count per matrix", name,
             e.counts.size());
      put_i32(out, static_cast<int64_t>(name.size()));
      out.write(name.data(), static_cast<std::streamsize>(name.size()));
      put_i32(out, calls);
      put_i32(out, static_cast<int64_t>(e.sums.size()));
      // Stored as llama-imatrix stores them: the mean over the tokens, times the calls.
      for (const float s : e.sums) {
        const float v = e.counts[0] > 0 ? s / e.counts[0] * static_cast<float>(calls) : s;
        out.write(reinterpret_cast<const char*>(&v), 4);
      }
    }
    put_i32(out, m.chunk_count);
    const std::string dataset = m.datasets.empty() ? std::string() : m.datasets.front();
    put_i32(out, static_cast<int64_t>(dataset.size()));
    out.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
    if (!out.flush()) fail("cannot write '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename '{}' to '{}'", tmp, path);
}

}  // namespace strata
