#include "model/lora_adapter.h"

#include <fmt/format.h>

#include <charconv>
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

// One adapter's low-rank pair for one matrix, in f32, its scale folded into B.
struct Part {
  int64_t rank = 0, n_in = 0, n_out = 0;
  std::vector<float> a, b;
};

std::vector<float> tensor_f32(const GgufTensorInfo& t, const std::string& path) {
  const auto info = dtype_info(static_cast<uint32_t>(t.type));
  if (!info || info->dequantize == nullptr)
    fail("LoRA adapter '{}': tensor '{}' has a type strata cannot read", path, t.name);
  std::vector<float> v(t.n_elements);
  dequantize_row(t.type, t.data, v.data(), static_cast<int64_t>(t.n_elements));
  return v;
}

Part read_part(const GgufTensorInfo& a, const GgufTensorInfo& b, const GgufTensorInfo& base,
               float s_user, float alpha, const std::string& path) {
  if (a.dims.size() != 2 || b.dims.size() != 2 || base.dims.size() != 2)
    fail("LoRA adapter '{}': '{}' and its pair must be 2-D matrices", path, base.name);
  Part p;
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
  p.a = tensor_f32(a, path);
  p.b = tensor_f32(b, path);
  const float s = alpha != 0.0f ? s_user * alpha / static_cast<float>(p.rank) : s_user;
  for (float& v : p.b) v *= s;
  return p;
}

// Rows [first, first + count) of a part's outputs (a fused qkv's q, k or v).
Part output_rows(const Part& p, int64_t first, int64_t count) {
  Part q = p;
  q.n_out = count;
  q.b.assign(p.b.begin() + first * p.rank, p.b.begin() + (first + count) * p.rank);
  return q;
}

LoraPair stacked(const std::vector<Part>& parts, bool transposed) {
  LoraPair pair;
  pair.n_in = parts.front().n_in;
  pair.n_out = parts.front().n_out;
  for (const Part& p : parts) {
    pair.rank += p.rank;
    pair.a.insert(pair.a.end(), p.a.begin(), p.a.end());
  }
  pair.b.reserve(static_cast<size_t>(pair.n_out * pair.rank));
  for (int64_t j = 0; j < pair.n_out; ++j)
    for (const Part& p : parts)
      pair.b.insert(pair.b.end(), p.b.begin() + j * p.rank, p.b.begin() + (j + 1) * p.rank);
  if (transposed) {
    pair.a_t.resize(pair.a.size());
    for (int64_t r = 0; r < pair.rank; ++r)
      for (int64_t i = 0; i < pair.n_in; ++i)
        pair.a_t[static_cast<size_t>(i * pair.rank + r)] =
            pair.a[static_cast<size_t>(r * pair.n_in + i)];
  }
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

void read_adapter(const LoraFile& file, const Model& model, PartsByTarget& parts) {
  const auto f = GgufFile::open(file.path, LoadMode::Map);
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

MatrixView LoraPair::view(const std::vector<float>& v, int64_t rows, int64_t cols) {
  MatrixView m;
  m.type = DType::F32;
  m.data = reinterpret_cast<const uint8_t*>(v.data());
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<uint64_t>(cols) * sizeof(float);
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
  for (const LoraFile& f : files) {
    read_adapter(f, model, parts);
    out.files.push_back(f.path);
  }
  out.layers.resize(static_cast<size_t>(model.config.n_layer));
  for (const auto& [key, list] : parts) {
    const auto role = static_cast<LayerMatrix>(key.second);
    LoraPair pair = stacked(list, role == LayerMatrix::FfnDown);
    if (key.first < 0)
      out.output = std::move(pair);
    else
      out.layers[static_cast<size_t>(key.first)][static_cast<size_t>(key.second)] =
          std::move(pair);
  }
  return out;
}

}  // namespace strata
