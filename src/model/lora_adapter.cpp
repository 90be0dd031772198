#include "model/lora_adapter.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <cmath>
#include <map>
#include <optional>

#include "core/error.h"
#include "format/gguf.h"
#include "model/model.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

constexpr std::string_view kLoraA = ".lora_a", kLoraB = ".lora_b";

std::optional<float> parse_scale(std::string_view text) {
  float v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return {};
  return v;
}

// What an adapter's base name adapts: a layer's role (a fused qkv's: AttnQkv), or the output.
struct Target {
  int64_t layer = -1;  // -1: the output head
  LayerMatrix role = LayerMatrix::Count;
};

// Refuses, by name, what strata does not adapt.
Target target_of(const std::string& base, const Model& model, const std::string& path) {
  const ModelConfig& c = model.config;
  if (base == "output.weight") return {};
  if (base == "token_embd.weight")
    fail("LoRA adapter '{}': strata does not adapt the token embedding (token_embd.weight)",
         path);
  int64_t layer = -1;
  size_t used = 0;
  if (base.starts_with("blk.")) {
    const char* first = base.data() + 4;
    const auto [end, ec] = std::from_chars(first, base.data() + base.size(), layer);
    used = static_cast<size_t>(end - base.data());
    if (ec != std::errc() || used >= base.size() || base[used] != '.') layer = -1;
  }
  if (layer < 0 || layer >= c.n_layer)
    fail("LoRA adapter '{}': tensor '{}' is not a matrix of a layer of the model", path, base);
  const std::string rest = base.substr(used + 1);
  if (rest.find("_exps") != std::string::npos || rest.find("_shexp") != std::string::npos ||
      rest.starts_with("ffn_gate_inp"))
    fail("LoRA adapter '{}': '{}' is part of a mixture of experts, which strata does not adapt",
         path, base);
  if (rest == "attn_qkv.weight") return {layer, LayerMatrix::AttnQkv};
  for (const MatrixName& m : c.arch->matrices)
    if (rest == m.gguf)
      for (const LayerMatrix role : kLoraRoles)
        if (role == m.role) return {layer, role};
  fail("LoRA adapter '{}': strata does not adapt '{}'", path, base);
}

// One adapter's low-rank pair for one matrix: its A and B as the file has them, and its s.
struct Part {
  int64_t rank = 0, n_in = 0, n_out = 0;
  float s = 1.0f;
  const GgufTensorInfo *a = nullptr, *b = nullptr;
  int64_t first_out = 0;  // a fused qkv's part: the first of B's rows it takes
};

// A tensor's values as `type` (F16 or BF16: the file's bytes; F32: decoded), rows
// [first, first + rows) of `cols` elements.
void append_values(const GgufTensorInfo& t, DType type, int64_t first, int64_t rows, int64_t cols,
                   std::vector<uint8_t>& out) {
  const uint64_t begin = row_bytes(t.type, static_cast<uint64_t>(first * cols));
  const uint64_t bytes = row_bytes(t.type, static_cast<uint64_t>(rows * cols));
  if (t.type == type) {
    out.insert(out.end(), t.data + begin, t.data + begin + bytes);
    return;
  }
  std::vector<float> v(static_cast<size_t>(rows * cols));
  dequantize_row(t.type, t.data + begin, v.data(), rows * cols);
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(float));
}

Part read_part(const GgufTensorInfo& a, const GgufTensorInfo& b, const GgufTensorInfo& base,
               float s_user, float alpha, const std::string& path) {
  if (a.dims.size() != 2 || b.dims.size() != 2 || base.dims.size() != 2)
    fail("LoRA adapter '{}': '{}' and its pair must be 2-D matrices", path, base.name);
  Part p;
  p.a = &a;
  p.b = &b;
  p.n_in = base.dims[0];
  p.n_out = base.dims[1];
  p.rank = a.dims[1];
  if (a.dims[0] != p.n_in || b.dims[1] != p.n_out)
    fail(
        "LoRA adapter '{}': tensor '{}' has shapes [{}, {}] and [{}, {}] where the base matrix is "
        "[{}, {}] (hint: maybe the wrong base model?)",
        path, base.name, a.dims[0], a.dims[1], b.dims[0], b.dims[1], p.n_in, p.n_out);
  if (b.dims[0] != p.rank || p.rank <= 0)
    fail("LoRA adapter '{}': '{}.lora_a' is not transposed (its rank {} against lora_b's {})", path,
         base.name, p.rank, b.dims[0]);
  for (const GgufTensorInfo* t : {&a, &b}) {
    const auto info = dtype_info(static_cast<uint32_t>(t->type));
    if (!info || info->dequantize == nullptr)
      fail("LoRA adapter '{}': tensor '{}' has a type strata cannot read", path, t->name);
  }
  p.s = alpha != 0.0f ? s_user * alpha / static_cast<float>(p.rank) : s_user;
  return p;
}

// Rows [first, first + count) of a part's outputs (a fused qkv's q, k or v).
Part output_rows(const Part& p, int64_t first, int64_t count) {
  Part q = p;
  q.n_out = count;
  q.first_out = first;
  return q;
}

// The type a stack keeps: the files' own where every A and B shares F16 or BF16, else f32.
DType stack_type(const std::vector<Part>& parts) {
  const DType first = parts.front().a->type;
  for (const Part& p : parts)
    if (p.a->type != first || p.b->type != first) return DType::F32;
  return first == DType::F16 || first == DType::BF16 ? first : DType::F32;
}

// `rows` rows of `cols` elements (of `size` bytes each) as cols rows of rows.
std::vector<uint8_t> transposed(const std::vector<uint8_t>& m, int64_t rows, int64_t cols,
                                size_t size) {
  std::vector<uint8_t> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&t[static_cast<size_t>(c * rows + r) * size],
                  &m[static_cast<size_t>(r * cols + c) * size], size);
  return t;
}

LoraPair stacked(const std::vector<Part>& parts, LayerMatrix role) {
  LoraPair pair;
  pair.type = stack_type(parts);
  pair.n_in = parts.front().n_in;
  pair.n_out = parts.front().n_out;
  for (const Part& p : parts) {
    pair.rank += p.rank;
    append_values(*p.a, pair.type, 0, p.rank, p.n_in, pair.a);
    pair.scale.insert(pair.scale.end(), static_cast<size_t>(p.rank), p.s);
  }
  // B's row j is every part's row j, side by side; kept as its columns for whole rows, and as
  // it is where the sparse FFN reads a neuron's row.
  std::vector<uint8_t> b;
  std::vector<std::vector<uint8_t>> bs(parts.size());
  for (size_t i = 0; i < parts.size(); ++i)
    append_values(*parts[i].b, pair.type, parts[i].first_out, parts[i].n_out, parts[i].rank,
                  bs[i]);
  for (int64_t j = 0; j < pair.n_out; ++j)
    for (size_t i = 0; i < parts.size(); ++i) {
      const uint64_t row = row_bytes(pair.type, static_cast<uint64_t>(parts[i].rank));
      b.insert(b.end(), bs[i].begin() + static_cast<int64_t>(j * row),
               bs[i].begin() + static_cast<int64_t>((j + 1) * row));
    }
  const size_t size = dtype_info(pair.type).block_bytes;
  pair.b_t = transposed(b, pair.n_out, pair.rank, size);
  if (role == LayerMatrix::FfnGate || role == LayerMatrix::FfnUp) pair.b = std::move(b);
  if (role == LayerMatrix::FfnDown) pair.a_t = transposed(pair.a, pair.rank, pair.n_in, size);
  return pair;
}

using PartsByTarget = std::map<std::pair<int64_t, int>, std::vector<Part>>;

void check_header(const GgufFile& f, const Model& model, const std::string& path) {
  const std::string type = f.get_string("general.type", "");
  if (type != "adapter")
    fail("LoRA adapter '{}': general.type is '{}', not 'adapter'", path, type);
  const std::string arch = f.get_string("general.architecture", "");
  const std::string model_arch = model.file->get_string("general.architecture", "");
  if (arch != model_arch)
    fail("LoRA adapter '{}' is for '{}', the model is '{}'", path, arch, model_arch);
  const std::string kind = f.get_string("adapter.type", "");
  if (kind != "lora") fail("LoRA adapter '{}': adapter.type is '{}', not 'lora'", path, kind);
  if (f.find("adapter.alora.invocation_tokens") != nullptr)
    fail("LoRA adapter '{}' is an activated LoRA (adapter.alora.invocation_tokens), which strata "
         "does not run", path);
}

// The pairs of one file into `parts`, which point into the file: `opened` keeps it.
void read_adapter(const LoraFile& file, const Model& model, PartsByTarget& parts,
                  std::vector<std::unique_ptr<GgufFile>>& opened) {
  opened.push_back(GgufFile::open(file.path, LoadMode::Map));
  const GgufFile* f = opened.back().get();
  check_header(*f, model, file.path);
  const auto alpha = static_cast<float>(f->get_float("adapter.lora.alpha", 0.0));
  std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
  for (const GgufTensorInfo& t : f->tensors()) {
    const std::string& n = t.name;
    if (n.ends_with(kLoraA))
      pairs[n.substr(0, n.size() - kLoraA.size())].first = &t;
    else if (n.ends_with(kLoraB))
      pairs[n.substr(0, n.size() - kLoraB.size())].second = &t;
    else if (!n.ends_with("_norm.weight"))  // llama.cpp skips norms too
      fail("LoRA adapter '{}': tensor '{}' is neither a lora_a nor a lora_b", file.path, n);
  }
  if (pairs.empty()) fail("LoRA adapter '{}' has no lora_a/lora_b pairs", file.path);
  const ModelConfig& c = model.config;
  for (const auto& [base, ab] : pairs) {
    if (ab.first == nullptr || ab.second == nullptr)
      fail("LoRA adapter '{}': the pair of '{}' lacks its {}", file.path, base,
           ab.first == nullptr ? "lora_a" : "lora_b");
    const Target t = target_of(base, model, file.path);
    const GgufTensorInfo* w = model.file->find_tensor(base);
    if (w == nullptr)
      fail("LoRA adapter '{}': '{}' is not in the model (hint: maybe the wrong base model?)",
           file.path, base);
    const Part p = read_part(*ab.first, *ab.second, *w, file.scale, alpha, file.path);
    if (t.role != LayerMatrix::AttnQkv) {
      parts[{t.layer, static_cast<int>(t.role)}].push_back(p);
      continue;
    }
    const int64_t q = c.n_head * c.head_dim, kv = c.n_head_kv * c.head_dim;
    parts[{t.layer, static_cast<int>(LayerMatrix::AttnQ)}].push_back(output_rows(p, 0, q));
    parts[{t.layer, static_cast<int>(LayerMatrix::AttnK)}].push_back(output_rows(p, q, kv));
    parts[{t.layer, static_cast<int>(LayerMatrix::AttnV)}].push_back(output_rows(p, q + kv, kv));
  }
}

}  // namespace

std::vector<LoraFile> parse_lora_list(std::string_view list, bool scale_required,
                                      const char* flag) {
  std::vector<LoraFile> files;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view part = list.substr(start, comma - start);
    start = comma + 1;
    LoraFile f{std::string(part), 1.0f};
    const size_t colon = part.rfind(':');
    const auto scale =
        colon == std::string_view::npos ? std::nullopt : parse_scale(part.substr(colon + 1));
    if (scale) f = {std::string(part.substr(0, colon)), *scale};
    if (scale_required && !scale)
      fail("{} '{}': each adapter is FILE:SCALE (a number after the last ':')", flag, part);
    if (f.path.empty()) fail("{} '{}': an adapter's file name is empty", flag, list);
    files.push_back(std::move(f));
  }
  return files;
}

MatrixView LoraPair::view(const std::vector<uint8_t>& v, int64_t rows, int64_t cols) const {
  MatrixView m;
  m.type = type;
  m.data = v.data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_bytes(type, static_cast<uint64_t>(cols));
  return m;
}

const LoraPair* LoraAdapters::find(int64_t layer, LayerMatrix role) const {
  if (layers.empty()) return nullptr;
  const LoraPair& p = layers[static_cast<size_t>(layer)][static_cast<size_t>(role)];
  return p.present() ? &p : nullptr;
}

uint64_t LoraAdapters::bytes() const {
  uint64_t total = output.bytes();
  for (const auto& l : layers)
    for (const LoraPair& p : l) total += p.bytes();
  return total;
}

int64_t LoraAdapters::matrices() const {
  int64_t n = output.present() ? 1 : 0;
  for (const auto& l : layers)
    for (const LoraPair& p : l) n += p.present() ? 1 : 0;
  return n;
}

LoraAdapters load_lora_adapters(std::span<const LoraFile> files, const Model& model) {
  LoraAdapters out;
  if (files.empty()) return out;
  PartsByTarget parts;
  std::vector<std::unique_ptr<GgufFile>> opened;
  for (const LoraFile& f : files) {
    read_adapter(f, model, parts, opened);
    out.files.push_back(f.path);
  }
  out.layers.resize(static_cast<size_t>(model.config.n_layer));
  for (const auto& [key, list] : parts) {
    const auto role = static_cast<LayerMatrix>(key.second);
    LoraPair pair = stacked(list, role);
    if (key.first < 0)
      out.output = std::move(pair);
    else
      out.layers[static_cast<size_t>(key.first)][static_cast<size_t>(key.second)] =
          std::move(pair);
  }
  return out;
}

}  // namespace strata
