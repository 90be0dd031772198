#include "offline/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/imatrix_file.h"
#include "model/config.h"
#include "tensor/quantize.h"
#include "tiers/bundle_layout.h"
#include "tiers/column_bundle_layout.h"

namespace strata {

namespace {

// A per-tensor scale other than 1 (llama.cpp's "<matrix>.scale") is applied to float matrices
// only (model/tensor_scales.h): quantized here without folding it in, the file would not load.
void refuse_per_tensor_scales(const GgufFile& f) {
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!t.name.ends_with(".scale") || !is_float_type(t.type)) continue;
    std::vector<float> v(static_cast<size_t>(t.n_elements));
    dequantize_row(t.type, t.data, v.data(), static_cast<int64_t>(v.size()));
    for (float x : v)
      if (x != 1.0f)
        fail(
            "'{}': tensor '{}' scales its matrix by {}; strata quantize does not fold "
            "per-tensor scales into quantized weights",
            f.path(), t.name.substr(0, 96), x);
  }
}

// Query heads per KV head; 1 where the file does not say (or says it per layer).
int query_heads_per_kv_head(const GgufFile& f, const std::string& arch) {
  const GgufValue* heads = f.find(arch + ".attention.head_count");
  const GgufValue* kv = f.find(arch + ".attention.head_count_kv");
  if (heads == nullptr || heads->type == GgufType::Array) return 1;
  const int64_t n_head = heads->as_int(arch + ".attention.head_count");
  const int64_t n_kv = kv == nullptr || kv->type == GgufType::Array
                           ? n_head
                           : kv->as_int(arch + ".attention.head_count_kv");
  return n_kv > 0 && n_head > 0 ? static_cast<int>(n_head / n_kv) : 1;
}

// The recipe's view of the model: its layer count and its architecture's exceptions (an
// architecture strata does not run gets llama.cpp's general rules).
RecipeOptions recipe_options(const GgufFile& f, const QuantizeOptions& o) {
  const std::string arch = f.get_string("general.architecture", "llama");
  const Architecture* a = find_architecture(arch);
  return {.n_layer = static_cast<int>(f.get_int(arch + ".block_count", 1)),
          .pure = o.pure,
          .quantize_predictors = o.quantize_predictors,
          .rules = a ? a->quant_rules : QuantRules::Default,
          .n_expert = static_cast<int>(f.get_int(arch + ".expert_count", 0)),
          .n_gqa = query_heads_per_kv_head(f, arch),
          .has_imatrix = !o.imatrix.empty()};
}

// How one input tensor becomes its output tensor.
struct TensorJob {
  const GgufTensorInfo* in;
  DType type;          // output type (for bundles: of their rows)
  uint64_t out_bytes;  // output tensor bytes
  bool bundles = false;
  std::vector<float> importance = {};  // per column (per expert and column), or empty
};

// The imatrix's importance of a tensor about to be quantized to `to`, checked against its shape
// (one row of columns per matrix, or per expert of a stacked tensor); empty where the file has
// none for it or the type's quantizer takes none.
std::vector<float> tensor_importance(const Imatrix& m, const GgufTensorInfo& t, DType to) {
  if (dtype_info(to).quantize_importance == nullptr || t.type == to) return {};
  std::vector<float> v = m.importance(t.name);
  if (v.empty()) return v;
  const auto cols = static_cast<uint64_t>(t.dims[0]);
  const uint64_t experts = t.dims.size() == 3 ? static_cast<uint64_t>(t.dims[2]) : 1;
  if (v.size() != cols && v.size() != cols * experts)
    fail("imatrix entry '{}' has {} values; the tensor has {} columns{}", t.name, v.size(), cols,
         experts > 1 ? fmt::format(" and {} experts", experts) : "");
  return v;
}

bool is_bundles(const std::string& name) {
  return name.size() > 12 && name.compare(name.size() - 12, 12, ".ffn_bundles") == 0;
}

// The output type of one tensor; fails for weights that are already quantized to another type.
DType output_type(const QuantizeOptions& o, const GgufTensorInfo& t, const RecipeOptions& ro) {
  const TensorName name = classify_tensor(t.name, t.dims.size());
  const DType want =
      tensor_type_with_overrides(o.recipe, t.name, t.dims.size(), t.dims[0], ro, o.overrides);
  if (t.type == want) return want;
  // 1-D tensors and a mixture's router are copied as they are (llama-quantize's rule).
  if (name.role == TensorRole::Vector || name.role == TensorRole::Router) return t.type;
  if (!is_float_type(t.type))
    fail("tensor '{}' is already {}: strata quantize reads F32, F16 or BF16 weights", t.name,
         dtype_name(t.type));
  return want;
}

// Rows [r0, r1) of `in` (type `from`, rows of n values) as `to`, through floats.
// importance (may be null): per column, rows_per_matrix rows to each n-column slice of it.
void convert_rows(const uint8_t* in, DType from, uint8_t* out, DType to, int64_t n, int64_t r0,
                  int64_t r1, std::vector<float>& scratch,
                  const std::vector<float>* importance = nullptr, int64_t rows_per_matrix = 1) {
  scratch.resize(static_cast<size_t>(n));
  const uint64_t in_rb = row_bytes(from, static_cast<uint64_t>(n));
  const uint64_t out_rb = row_bytes(to, static_cast<uint64_t>(n));
  const int64_t slices = importance ? static_cast<int64_t>(importance->size()) / n : 0;
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(from, in + static_cast<uint64_t>(r) * in_rb, scratch.data(), n);
    const float* w = slices > 0 ? importance->data() + (r / rows_per_matrix) % slices * n : nullptr;
    quantize_row(to, scratch.data(), out + static_cast<uint64_t>(r) * out_rb, n, w);
  }
}

// A plain tensor: every row converted, rows split over the pool.
void convert_tensor(const GgufTensorInfo& t, DType to, const std::vector<float>& importance,
                    std::vector<uint8_t>& out, ThreadPool& pool) {
  const int64_t n = t.dims[0], rows = t.rows();
  out.resize(row_bytes(to, static_cast<uint64_t>(n)) * static_cast<uint64_t>(rows));
  if (t.type == to) {
    std::copy(t.data, t.data + t.n_bytes, out.begin());
    return;
  }
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1, int) {
    thread_local std::vector<float> scratch;
    convert_rows(t.data, t.type, out.data(), to, n, r0, r1, scratch,
                 importance.empty() ? nullptr : &importance, t.dims.size() > 1 ? t.dims[1] : 1);
  });
}

// A layer's neuron bundles: each neuron's gate/up/down_t rows requantized into the new layout.
void convert_bundles(const GgufTensorInfo& t, const BundleLayout& from, const BundleLayout& to,
                     std::vector<uint8_t>& out, ThreadPool& pool) {
  out.assign(to.bundle_bytes * static_cast<uint64_t>(from.n_ff), 0);
  const int rows = from.has_gate ? 3 : 2;
  const uint64_t in_off[3] = {from.gate_offset(), from.up_offset(), from.down_offset()};
  const uint64_t out_off[3] = {to.gate_offset(), to.up_offset(), to.down_offset()};
  const int first = from.has_gate ? 0 : 1;
  pool.parallel_for(from.n_ff, [&](int64_t j0, int64_t j1, int) {
    thread_local std::vector<float> scratch;
    for (int64_t j = j0; j < j1; ++j)
      for (int k = first; k < first + rows; ++k)
        convert_rows(t.data + static_cast<uint64_t>(j) * from.bundle_bytes + in_off[k], from.type,
                     out.data() + static_cast<uint64_t>(j) * to.bundle_bytes + out_off[k], to.type,
                     from.n_embd, 0, 1, scratch);
  });
}

}  // namespace

QuantizeReport quantize_model(const QuantizeOptions& o,
                              const std::function<void(uint64_t, uint64_t)>& progress) {
  auto in = GgufFile::open(o.input);
  GgufFile& f = *in;
  const RecipeOptions ro = recipe_options(f, o);
  if (f.find(kColumnBundleKindKey) != nullptr)
    fail(
        "'{}' is column-bundled: quantize the model it was bundled from, then bundle that "
        "(strata bundle --columns holds quantized FFNs too)",
        o.input);
  const bool bundled = f.find(kBundleBytesKey) != nullptr;
  BundleLayout from_bundle, to_bundle;
  if (bundled) {
    const auto type = dtype_info(static_cast<uint32_t>(f.get_int(kBundleTypeKey)));
    if (!type || !is_float_type(type->type))
      fail("'{}': bundles of {} rows: strata quantize reads F32, F16 or BF16 weights", o.input,
           type ? type->name : "unknown");
    const ModelConfig c = ModelConfig::from_gguf(f);
    const int64_t n_embd = c.n_embd, n_ff = c.ffn_neurons();  // a mixture: every expert's
    const bool has_gate = ffn_has_gate(c.ffn);
    from_bundle = BundleLayout::make(type->type, n_embd, n_ff, has_gate);
    // One type for a bundle's three rows: the recipe's choice for ffn_up of the middle layer.
    const DType rows =
        recipe_tensor_type(o.recipe, {TensorRole::FfnUp, ro.n_layer / 2}, n_embd, ro);
    to_bundle = BundleLayout::make(rows, n_embd, n_ff, has_gate);
  }

  refuse_per_tensor_scales(f);
  if (o.imatrix.empty() && quant_recipe_needs_imatrix(o.recipe))
    fail(
        "{} needs an importance matrix (--imatrix FILE, from strata imatrix or llama-imatrix), "
        "as llama-quantize does",
        quant_recipe_name(o.recipe));
  const Imatrix imatrix = o.imatrix.empty() ? Imatrix{} : read_imatrix(o.imatrix);
  std::vector<TensorJob> jobs;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (bundled && is_bundles(t.name)) {
      if (t.dims.size() != 2 || static_cast<uint64_t>(t.dims[0]) != from_bundle.bundle_bytes)
        fail("tensor '{}' is not a bundle table of {} bytes per neuron", t.name,
             from_bundle.bundle_bytes);
      jobs.push_back(
          {&t, to_bundle.type, to_bundle.bundle_bytes * static_cast<uint64_t>(t.dims[1]), true});
      continue;
    }
    const DType type = output_type(o, t, ro);
    std::vector<float> importance = tensor_importance(imatrix, t, type);
    if (importance.empty() && type != t.type &&
        tensor_needs_imatrix(o.recipe, classify_tensor(t.name, t.dims.size()), type))
      fail("tensor '{}' as {} needs an importance matrix{} (as llama-quantize)", t.name,
           dtype_name(type),
           o.imatrix.empty() ? " (--imatrix FILE)" : " and the file has none for it");
    jobs.push_back(
        {&t, type,
         row_bytes(type, static_cast<uint64_t>(t.dims[0])) * static_cast<uint64_t>(t.rows()), false,
         std::move(importance)});
  }

  GgufWriter w(o.output, f.alignment());
  w.set_powerinfer_magic(f.is_powerinfer());
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  w.set("general.file_type", GgufValue::u32(quant_recipe_file_type(o.recipe)));
  w.set("general.quantization_version", GgufValue::u32(2));
  if (bundled) {
    w.set(kBundleTypeKey, GgufValue::u32(static_cast<uint32_t>(to_bundle.type)));
    w.set(kBundleTypeNameKey, GgufValue::str(dtype_name(to_bundle.type)));
    w.set(kBundleBytesKey, GgufValue::u64(to_bundle.bundle_bytes));
  }
  QuantizeReport report;
  for (const TensorJob& j : jobs) {
    std::vector<int64_t> dims = j.in->dims;
    if (j.bundles) dims[0] = static_cast<int64_t>(to_bundle.bundle_bytes);
    w.add_tensor(j.in->name, j.bundles ? j.in->type : j.type, dims);
    report.input_bytes += j.in->n_bytes;
    report.output_bytes += j.out_bytes;
    ++report.tensors;
    ++report.by_type[static_cast<uint32_t>(j.type) % 64];
    if (!j.importance.empty()) ++report.weighted;
  }
  ThreadPool pool(std::max(1, o.threads));
  std::vector<uint8_t> out;
  uint64_t done = 0;
  for (const TensorJob& j : jobs) {
    if (j.bundles)
      convert_bundles(*j.in, from_bundle, to_bundle, out, pool);
    else
      convert_tensor(*j.in, j.type, j.importance, out, pool);
    w.write_tensor_data(out);
    in->memory().release(j.in->data, j.in->n_bytes);  // keep only the tensor at work resident
    done += j.in->n_bytes;
    if (progress) progress(done, report.input_bytes);
  }
  w.finish();
  return report;
}

}  // namespace strata
