#include "offline/convert.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "format/gguf_writer.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "offline/hf_family.h"
#include "offline/hf_rope_scaling.h"
#include "offline/hf_tokenizer.h"
#include "offline/quant_recipe.h"
#include "tensor/quantize.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& path) {
  const std::string text = read_regular_file(path.string(), kMaxJsonFileBytes, "JSON");
  try {
    return parse_json_bounded(text, fmt::format("'{}'", path.string()));
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

const HfFamily& family_of(const std::string& architecture, const std::string& path) {
  std::string names;
  for (const HfFamily* f :
       {&hf_llama_family(), &hf_falcon_family(), &hf_opt_family(), &hf_qwen2_family(),
        &hf_qwen3_family(), &hf_mixtral_family(), &hf_qwen3moe_family(), &hf_qwen2moe_family(),
        &hf_gemma2_family(), &hf_gemma3_family(), &hf_phi3_family(), &hf_glm4moe_family()})
    for (const std::string& c : f->classes) {
      if (c == architecture) return *f;
      names += (names.empty() ? "" : ", ") + c;
    }
  fail("'{}': architecture '{}' is not supported ({})", path, architecture.substr(0, 64), names);
}

// A multimodal checkpoint's config (Gemma3ForConditionalGeneration): the text model's keys in
// text_config over the top level's, as llama.cpp's converter merges them.
nlohmann::json text_model_config(nlohmann::json j) {
  if (!j.contains("text_config") || !j["text_config"].is_object()) return j;
  const nlohmann::json text = j["text_config"];
  for (const auto& [k, v] : text.items()) j[k] = v;
  return j;
}

HfConfig read_config(const fs::path& dir, const HfFamily*& family) {
  const std::string path = (dir / "config.json").string();
  const auto j = text_model_config(read_json(dir / "config.json"));
  if (!j.is_object()) fail("'{}' is not a JSON object", path);
  const ConfigReader r(j, path);
  HfConfig c{};
  const auto& archs = j.contains("architectures") ? j["architectures"] : nlohmann::json();
  c.architecture =
      archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>() : "";
  family = &family_of(c.architecture, path);
  family->read(r, c);
  c.model.arch = find_architecture(c.model.architecture);
  // rope_theta at the top (or, in newer configs, in rope_parameters, per layer type where the
  // layers differ: the full-attention layers' there), the family's default without it.
  double theta = r.positive_or("rope_theta", c.model.rope_freq_base);
  if (!r.has("rope_theta") && j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    const bool per_type = rp.contains("full_attention") && rp["full_attention"].is_object();
    theta = ConfigReader(per_type ? rp["full_attention"] : rp, path + ": rope_parameters")
                .positive_or("rope_theta", c.model.rope_freq_base);
  }
  c.model.rope_freq_base = static_cast<float>(theta);
  if (c.model.n_rot == 0) c.model.n_rot = c.model.head_dim;  // unless partial (Phi-4-mini)
  if (c.model.arch->rope()) {
    HfRopeScaling rope = read_hf_rope_scaling(
        j, path, theta, c.model.n_rot, c.model.n_ctx_train,
        {.rope_freqs = c.model.arch->rope_freqs, .factor_pair = c.model.arch->rope_factor_pair});
    c.model.rope_scaling = rope.scaling;
    c.rope_freqs = std::move(rope.rope_freqs);
    c.rope_factors_long = std::move(rope.long_factors);
    c.rope_factors_short = std::move(rope.short_factors);
  }
  c.bos = r.token_id("bos_token_id", c.model.n_vocab);
  c.eos = r.token_id("eos_token_id", c.model.n_vocab);
  if (c.model.head_dim <= 0 || c.model.n_head % c.model.n_head_kv != 0 || c.model.head_dim % 2 != 0)
    fail("'{}' has inconsistent sizes (heads {}, key/value heads {}, head size {})", path,
         c.model.n_head, c.model.n_head_kv, c.model.head_dim);
  return c;
}

// A multimodal checkpoint's text model under the names of its text-only class: transformers'
// older "language_model.model.*" / "language_model.lm_head.*" and newer
// "model.language_model.*"; the vision tower's and projector's tensors keep their names, which
// no plan reads.
std::string text_model_name(const std::string& name) {
  for (auto [from, to] : {std::pair{"language_model.model.", "model."},
                          {"language_model.lm_head.", "lm_head."},
                          {"model.language_model.", "model."}})
    if (name.starts_with(from)) return to + name.substr(std::string_view(from).size());
  return name;
}

// All tensors of the checkpoint by name, from one file or the shards an index names.
struct Checkpoint {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafeTensor*> tensors;
  std::map<std::string, const SafetensorsFile*> file_of;
};

Checkpoint open_checkpoint(const fs::path& dir) {
  Checkpoint ck;
  std::vector<std::string> shards;
  if (fs::exists(dir / "model.safetensors.index.json")) {
    const auto index = read_json(dir / "model.safetensors.index.json");
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail("'{}' has no weight_map", (dir / "model.safetensors.index.json").string());
    std::map<std::string, bool> seen;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string())
        fail("'{}': weight_map entry '{}' is not a file name",
             (dir / "model.safetensors.index.json").string(), name);
      const auto f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        fail("'{}': weight_map names '{}', not a file in the directory",
             (dir / "model.safetensors.index.json").string(), f);
      if (!seen[f]) shards.push_back(f);
      seen[f] = true;
    }
  } else if (fs::exists(dir / "model.safetensors")) {
    shards.push_back("model.safetensors");
  } else {
    fail("'{}' has no model.safetensors or model.safetensors.index.json", dir.string());
  }
  for (const auto& s : shards) {
    if (!fs::exists(dir / s)) fail("shard '{}' named by the index is missing", (dir / s).string());
    ck.files.push_back(SafetensorsFile::open((dir / s).string()));
    for (const auto& [stored, t] : ck.files.back()->tensors()) {
      const std::string name = text_model_name(stored);
      if (ck.tensors.count(name)) fail("tensor '{}' appears twice in the checkpoint", name);
      ck.tensors[name] = &t;
      ck.file_of[name] = ck.files.back().get();
    }
  }
  return ck;
}

int64_t token_count(const GgufMetadata& tokenizer) {
  for (const auto& [k, v] : tokenizer)
    if (k == "tokenizer.ggml.tokens") return static_cast<int64_t>(v.items.size());
  return 0;
}

// Checkpoints often have more embedding rows than tokenizer entries (padding to a round size):
// add unused "[PAD<id>]" tokens, as llama.cpp's converter does. More entries than rows is an error.
void pad_vocabulary(GgufMetadata& tokenizer, int64_t n_vocab, const std::string& dir) {
  GgufValue* tokens = nullptr;
  for (auto& [k, v] : tokenizer)
    if (k == "tokenizer.ggml.tokens") tokens = &v;
  const int64_t have = static_cast<int64_t>(tokens->items.size());
  if (have > n_vocab)
    fail("'{}': the tokenizer has {} tokens but vocab_size is {}", dir, have, n_vocab);
  for (auto& [k, v] : tokenizer) {
    for (int64_t i = have; i < n_vocab; ++i) {
      if (k == "tokenizer.ggml.tokens")
        v.items.push_back(GgufValue::str(fmt::format("[PAD{}]", i)));
      if (k == "tokenizer.ggml.scores") v.items.push_back(GgufValue::f32(-1e9f));
      if (k == "tokenizer.ggml.token_type") v.items.push_back(GgufValue::i32(5));  // unused
    }
  }
}

// config.json's vocabulary and layer count against the checkpoint's tensors, so that a wrong
// value (a 20M vocabulary) is an error here instead of gigabytes allocated from it.
void check_sizes_against_tensors(const HfConfig& c, const HfFamily& family, const Checkpoint& ck,
                                 const std::string& dir) {
  const auto embd = ck.tensors.find(family.embedding);
  if (embd == ck.tensors.end()) fail("the checkpoint lacks the tensor '{}'", family.embedding);
  const std::vector<int64_t> want = {c.model.n_vocab, c.model.n_embd};
  if (embd->second->shape != want)
    fail("'{}': config.json says vocab_size {} and hidden_size {}, but {} has shape [{}]", dir,
         c.model.n_vocab, c.model.n_embd, family.embedding, fmt::join(embd->second->shape, ", "));
  auto layer_tensor = [&](int64_t l) {
    return fmt::format(fmt::runtime(family.layer_norm_name), l);
  };
  const std::string last = layer_tensor(c.model.n_layer - 1);
  if (!ck.tensors.count(last))
    fail("'{}': config.json says num_hidden_layers {}, but the checkpoint lacks '{}'", dir,
         c.model.n_layer, last);
  if (ck.tensors.count(layer_tensor(c.model.n_layer)))
    fail("'{}': the checkpoint has more layers than num_hidden_layers {}", dir, c.model.n_layer);
}

// The tokenizer as the file holds it, and the file's vocabulary size into c: the tokenizer padded
// to the embedding's rows, or (Gemma 3, whose embedding holds rows past its tokenizer: the
// multimodal models' 64) the embedding cut to the tokenizer, as llama.cpp's converter does.
GgufMetadata file_vocabulary(const std::string& dir, const HfFamily& family, HfConfig& c) {
  GgufMetadata tokenizer = read_hf_tokenizer(dir, c.bos, c.eos, c.model.n_vocab);
  if (family.vocab_from_tokenizer)
    c.model.n_vocab = std::min(c.model.n_vocab, token_count(tokenizer));
  pad_vocabulary(tokenizer, c.model.n_vocab, dir);
  return tokenizer;
}

// One checkpoint tensor's rows (in the plan's order) converted to the plan's type, in batches of
// about 4 MiB so the output buffer stays small.
void write_rows(const Planned& p, const SafeTensor& t, GgufWriter& w, std::vector<float>& row,
                std::vector<uint8_t>& out) {
  const int64_t cols = p.cols == 0 ? p.rows : p.cols;
  const int64_t rows = p.cols == 0 ? 1 : p.rows;
  const uint64_t rb = row_bytes(p.type, cols);
  row.resize(cols);
  const int64_t batch = std::max<int64_t>(1, (int64_t{4} << 20) / static_cast<int64_t>(rb));
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t n = std::min(batch, rows - r0);
    out.resize(rb * n);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t src = p.source_row ? p.source_row(r0 + r) : r0 + r;
      safetensor_to_f32(t, static_cast<uint64_t>(src * cols), cols, row.data());
      if (p.shift != 0.0f)
        for (float& x : row) x += p.shift;
      quantize_row(p.type, row.data(), out.data() + r * rb, cols);
    }
    w.write_tensor_data(out);
  }
}

}  // namespace

void convert_hf_to_gguf(const ConvertOptions& o,
                        const std::function<void(const ConvertProgress&)>& progress) {
  const fs::path dir(o.input_dir);
  if (!fs::is_directory(dir)) fail("'{}' is not a directory", o.input_dir);
  const HfFamily* family = nullptr;
  HfConfig c = read_config(dir, family);
  Checkpoint ck = open_checkpoint(dir);
  check_sizes_against_tensors(c, *family, ck, o.input_dir);  // before config.json sizes anything
  const int64_t embedding_rows = c.model.n_vocab;
  const GgufMetadata tokenizer = file_vocabulary(o.input_dir, *family, c);
  std::vector<Planned> plan =
      family->plan(c, [&](const std::string& name) { return ck.tensors.count(name) != 0; });
  for (Planned& p : plan)
    if (p.hf_name == family->embedding) p.source_rows = embedding_rows;
  for (const auto& [name, values] : {std::pair{"rope_freqs.weight", &c.rope_freqs},
                                     {"rope_factors_long.weight", &c.rope_factors_long},
                                     {"rope_factors_short.weight", &c.rope_factors_short}})
    if (!values->empty())
      plan.push_back({.gguf_name = name,
                      .hf_name = "",
                      .rows = static_cast<int64_t>(values->size()),
                      .cols = 0,
                      .source_row = nullptr,
                      .type = DType::F32,
                      .stack = {},
                      .values = *values});
  for (Planned& p : plan) p.type = p.cols == 0 ? DType::F32 : DType::F16;

  // Each matrix's type from the recipe (1-D tensors stay F32).
  const RecipeOptions recipe{
      .n_layer = static_cast<int>(c.model.n_layer),
      .rules = c.model.arch->quant_rules,
      .n_expert = static_cast<int>(c.model.n_expert),
      .n_gqa = static_cast<int>(c.model.n_head_kv > 0 ? c.model.n_head / c.model.n_head_kv : 1)};
  for (auto& p : plan)
    if (p.cols != 0)
      p.type = recipe_tensor_type(o.recipe, classify_tensor(p.gguf_name, 2), p.cols, recipe);

  // Check every tensor before writing anything.
  uint64_t total_bytes = 0;
  for (const auto& p : plan) {
    for (const std::string& source : p.sources()) {
      const auto it = ck.tensors.find(source);
      if (it == ck.tensors.end()) fail("the checkpoint lacks the tensor '{}'", source);
      const auto& shape = it->second->shape;
      const std::vector<int64_t> want =
          p.cols == 0 ? std::vector<int64_t>{p.rows}
                      : std::vector<int64_t>{p.source_rows > 0 ? p.source_rows : p.rows, p.cols};
      if (shape != want)
        fail("tensor '{}' has shape [{}], expected [{}]", source, fmt::join(shape, ", "),
             fmt::join(want, ", "));
      total_bytes += it->second->n_bytes;
    }
    if (p.cols != 0 && p.cols % static_cast<int64_t>(dtype_info(p.type).block_size) != 0)
      fail("tensor '{}' rows of {} cannot be stored as {} (blocks of {})", p.sources()[0], p.cols,
           dtype_name(p.type), dtype_info(p.type).block_size);
  }

  ModelConfig mc = c.model;
  mc.name = o.name.empty() ? dir.filename().string() : o.name;
  check_writable(mc);  // before the output exists
  GgufWriter w(o.output);
  write_config(mc, w);
  w.set("general.source.architecture", GgufValue::str(c.architecture));
  w.set("general.file_type", GgufValue::u32(quant_recipe_file_type(o.recipe)));
  for (const auto& [k, v] : tokenizer) w.set(k, v);
  for (const auto& p : plan) {
    if (p.cols == 0)
      w.add_tensor(p.gguf_name, p.type, {p.rows});
    else if (!p.stack.empty())
      w.add_tensor(p.gguf_name, p.type, {p.cols, p.rows, static_cast<int64_t>(p.stack.size())});
    else
      w.add_tensor(p.gguf_name, p.type, {p.cols, p.rows});
  }

  uint64_t done_bytes = 0;
  std::vector<float> row;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    if (p.generated())
      w.write_tensor_data(
          {reinterpret_cast<const uint8_t*>(p.values.data()), p.values.size() * sizeof(float)});
    for (const std::string& source : p.sources()) {
      const SafeTensor& t = *ck.tensors.at(source);
      write_rows(p, t, w, row, out);
      ck.file_of.at(source)->release(t);
      done_bytes += t.n_bytes;
    }
    if (progress)
      progress({static_cast<int64_t>(i + 1), static_cast<int64_t>(plan.size()), done_bytes,
                total_bytes});
  }
  w.finish();
}

}  // namespace strata
