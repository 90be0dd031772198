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
#include "offline/hf_tokenizer.h"
#include "offline/quant_recipe.h"
#include "tensor/quantize.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

// config.json: the model's hyper-parameters (as strata's ModelConfig) plus what only matters
// while converting.
struct HfConfig {
  ModelConfig model;
  std::string architecture;  // Hugging Face's class name
  bool tied;
  int64_t bos, eos;
};

nlohmann::json read_json(const fs::path& path) {
  const std::string text = read_regular_file(path.string(), kMaxJsonFileBytes, "JSON");
  try {
    return parse_json_bounded(text, fmt::format("'{}'", path.string()));
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not valid JSON: {}", path.string(), e.what());
  }
}

// config.json values are checked as strictly as strata checks a GGUF file, so convert never
// writes a file that strata then refuses, nor truncates a value silently (64.5 -> 64, 2^62 in
// a u32 -> 0).
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  int64_t whole(const char* key, int64_t lo, int64_t hi) const {
    if (!has(key)) fail("'{}' lacks '{}'", path_, key);
    return whole_or(key, lo, hi, 0);
  }
  int64_t whole_or(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    if (!has(key)) return fallback;
    const auto& v = j_[key];
    if (!v.is_number_integer()) fail("'{}': '{}' is {}, not a whole number", path_, key, v.dump());
    // nlohmann keeps non-negative numbers unsigned: above INT64_MAX is out of any range here.
    const bool huge = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX;
    if (huge || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail("'{}': '{}' = {} is outside [{}, {}]", path_, key, v.dump(), lo, hi);
    return v.get<int64_t>();
  }
  double positive_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& v = j_[key];
    const double x = v.is_number() ? v.get<double>() : -1;
    if (!(x > 0) || !std::isfinite(x) || !std::isfinite(static_cast<float>(x)))
      fail("'{}': '{}' is {}, not a positive number", path_, key, v.dump());
    return x;
  }
  std::string text_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail("'{}': '{}' is {}, not a string", path_, key, j_[key].dump());
    return j_[key].get<std::string>();
  }
  bool flag_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean())
      fail("'{}': '{}' is {}, not true or false", path_, key, j_[key].dump());
    return j_[key].get<bool>();
  }
  // A special token id: absent, null or a list (several EOS ids) give -1.
  int64_t token_id(const char* key, int64_t n_vocab) const {
    if (!has(key) || j_[key].is_array()) return -1;
    return whole(key, 0, n_vocab - 1);
  }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

HfConfig read_config(const fs::path& dir) {
  const std::string path = (dir / "config.json").string();
  const auto j = read_json(dir / "config.json");
  if (!j.is_object()) fail("'{}' is not a JSON object", path);
  const ConfigReader r(j, path);
  HfConfig c{};
  const auto& archs = j.contains("architectures") ? j["architectures"] : nlohmann::json();
  c.architecture =
      archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>() : "";
  if (c.architecture != "LlamaForCausalLM" && c.architecture != "MistralForCausalLM")
    fail("'{}': architecture '{}' is not supported (LlamaForCausalLM, MistralForCausalLM)", path,
         c.architecture);
  const std::string act = r.text_or("hidden_act", "silu");
  if (act == "silu")
    c.model.ffn = FfnActivation::SwiGLU;
  else if (act == "relu")
    c.model.ffn = FfnActivation::ReGLU;
  else
    fail("'{}': hidden_act '{}' is not supported (silu, relu)", path, act);
  constexpr int64_t kU32 = UINT32_MAX;  // GGUF stores the sizes as u32
  c.model.n_embd = r.whole("hidden_size", 1, kU32);
  c.model.n_ff = r.whole("intermediate_size", 1, kU32);
  c.model.n_layer = r.whole("num_hidden_layers", 1, kU32);
  c.model.n_head = r.whole("num_attention_heads", 1, kU32);
  c.model.n_head_kv = r.whole_or("num_key_value_heads", 1, kU32, c.model.n_head);
  c.model.n_vocab = r.whole("vocab_size", 1, kU32);
  c.model.n_ctx_train = r.whole_or("max_position_embeddings", 1, kU32, 2048);
  c.model.architecture = "llama";  // Mistral is llama in GGUF
  c.model.norm_eps = static_cast<float>(r.positive_or("rms_norm_eps", 1e-5));
  c.model.rope_freq_base = static_cast<float>(r.positive_or("rope_theta", 10000.0));
  c.tied = r.flag_or("tie_word_embeddings", false);
  c.model.head_dim = r.whole_or("head_dim", 1, kU32, c.model.n_embd / c.model.n_head);
  c.model.n_rot = c.model.head_dim;
  c.bos = r.token_id("bos_token_id", c.model.n_vocab);
  c.eos = r.token_id("eos_token_id", c.model.n_vocab);
  if (c.model.head_dim <= 0 || c.model.n_head % c.model.n_head_kv != 0 || c.model.head_dim % 2 != 0)
    fail("'{}' has inconsistent sizes (heads {}, key/value heads {}, head size {})", path,
         c.model.n_head, c.model.n_head_kv, c.model.head_dim);
  return c;
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
    for (const auto& [name, t] : ck.files.back()->tensors()) {
      if (ck.tensors.count(name)) fail("tensor '{}' appears in two shards", name);
      ck.tensors[name] = &t;
      ck.file_of[name] = ck.files.back().get();
    }
  }
  return ck;
}

struct Planned {
  std::string gguf_name, hf_name;
  int64_t rows, cols;     // cols == 0: a vector of `rows`
  int64_t permute_heads;  // > 0: rows are q/k of this many heads, to reorder for GGUF's rope
  DType type;
};

// llama.cpp's q/k permutation: HF rotates dims (i, i + d/2) of each head; GGUF files rotate
// adjacent pairs, so row 2i of a head takes HF row i and row 2i+1 takes HF row i + d/2.
int64_t source_row(int64_t row, int64_t rows, int64_t heads) {
  const int64_t hd = rows / heads, h = row / hd, r = row % hd;
  return h * hd + (r % 2) * (hd / 2) + r / 2;
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
void check_sizes_against_tensors(const HfConfig& c, const Checkpoint& ck, const std::string& dir) {
  const auto embd = ck.tensors.find("model.embed_tokens.weight");
  if (embd == ck.tensors.end()) fail("the checkpoint lacks the tensor 'model.embed_tokens.weight'");
  const std::vector<int64_t> want = {c.model.n_vocab, c.model.n_embd};
  if (embd->second->shape != want)
    fail(
        "'{}': config.json says vocab_size {} and hidden_size {}, but "
        "model.embed_tokens.weight has shape [{}]",
        dir, c.model.n_vocab, c.model.n_embd, fmt::join(embd->second->shape, ", "));
  const std::string last =
      fmt::format("model.layers.{}.input_layernorm.weight", c.model.n_layer - 1);
  if (!ck.tensors.count(last))
    fail("'{}': config.json says num_hidden_layers {}, but the checkpoint lacks '{}'", dir,
         c.model.n_layer, last);
  if (ck.tensors.count(fmt::format("model.layers.{}.input_layernorm.weight", c.model.n_layer)))
    fail("'{}': the checkpoint has more layers than num_hidden_layers {}", dir, c.model.n_layer);
}

}  // namespace

void convert_hf_to_gguf(const ConvertOptions& o,
                        const std::function<void(const ConvertProgress&)>& progress) {
  const fs::path dir(o.input_dir);
  if (!fs::is_directory(dir)) fail("'{}' is not a directory", o.input_dir);
  const HfConfig c = read_config(dir);
  Checkpoint ck = open_checkpoint(dir);
  check_sizes_against_tensors(c, ck, o.input_dir);  // before anything is sized by config.json
  GgufMetadata tokenizer = read_hf_tokenizer(o.input_dir, c.bos, c.eos, c.model.n_vocab);
  pad_vocabulary(tokenizer, c.model.n_vocab, o.input_dir);

  const int64_t q_dim = c.model.n_head * c.model.head_dim,
                kv_dim = c.model.n_head_kv * c.model.head_dim;
  std::vector<Planned> plan;
  plan.push_back({"token_embd.weight", "model.embed_tokens.weight", c.model.n_vocab, c.model.n_embd,
                  0, DType::F16});
  plan.push_back({"output_norm.weight", "model.norm.weight", c.model.n_embd, 0, 0, DType::F32});
  if (!c.tied && ck.tensors.count("lm_head.weight"))
    plan.push_back(
        {"output.weight", "lm_head.weight", c.model.n_vocab, c.model.n_embd, 0, DType::F16});
  for (int64_t l = 0; l < c.model.n_layer; ++l) {
    const std::string g = fmt::format("blk.{}.", l), h = fmt::format("model.layers.{}.", l);
    plan.push_back(
        {g + "attn_norm.weight", h + "input_layernorm.weight", c.model.n_embd, 0, 0, DType::F32});
    plan.push_back({g + "attn_q.weight", h + "self_attn.q_proj.weight", q_dim, c.model.n_embd,
                    c.model.n_head, DType::F16});
    plan.push_back({g + "attn_k.weight", h + "self_attn.k_proj.weight", kv_dim, c.model.n_embd,
                    c.model.n_head_kv, DType::F16});
    plan.push_back({g + "attn_v.weight", h + "self_attn.v_proj.weight", kv_dim, c.model.n_embd, 0,
                    DType::F16});
    plan.push_back({g + "attn_output.weight", h + "self_attn.o_proj.weight", c.model.n_embd, q_dim,
                    0, DType::F16});
    plan.push_back({g + "ffn_norm.weight", h + "post_attention_layernorm.weight", c.model.n_embd, 0,
                    0, DType::F32});
    plan.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", c.model.n_ff, c.model.n_embd,
                    0, DType::F16});
    plan.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", c.model.n_ff, c.model.n_embd, 0,
                    DType::F16});
    plan.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", c.model.n_embd, c.model.n_ff,
                    0, DType::F16});
  }

  // Each matrix's type from the recipe (1-D tensors stay F32).
  for (auto& p : plan)
    if (p.cols != 0)
      p.type = recipe_tensor_type(o.recipe, classify_tensor(p.gguf_name, 2), p.cols,
                                  {static_cast<int>(c.model.n_layer)});

  // Check every tensor before writing anything.
  uint64_t total_bytes = 0;
  for (const auto& p : plan) {
    const auto it = ck.tensors.find(p.hf_name);
    if (it == ck.tensors.end()) fail("the checkpoint lacks the tensor '{}'", p.hf_name);
    const auto& shape = it->second->shape;
    const std::vector<int64_t> want =
        p.cols == 0 ? std::vector<int64_t>{p.rows} : std::vector<int64_t>{p.rows, p.cols};
    if (shape != want)
      fail("tensor '{}' has shape [{}], expected [{}]", p.hf_name, fmt::join(shape, ", "),
           fmt::join(want, ", "));
    if (p.cols != 0 && p.cols % static_cast<int64_t>(dtype_info(p.type).block_size) != 0)
      fail("tensor '{}' rows of {} cannot be stored as {} (blocks of {})", p.hf_name, p.cols,
           dtype_name(p.type), dtype_info(p.type).block_size);
    total_bytes += it->second->n_bytes;
  }

  GgufWriter w(o.output);
  ModelConfig mc = c.model;
  mc.name = o.name.empty() ? dir.filename().string() : o.name;
  write_config(mc, w);
  w.set("general.source.architecture", GgufValue::str(c.architecture));
  w.set("general.file_type", GgufValue::u32(quant_recipe_file_type(o.recipe)));
  for (const auto& [k, v] : tokenizer) w.set(k, v);
  for (const auto& p : plan) {
    if (p.cols == 0)
      w.add_tensor(p.gguf_name, p.type, {p.rows});
    else
      w.add_tensor(p.gguf_name, p.type, {p.cols, p.rows});
  }

  uint64_t done_bytes = 0;
  std::vector<float> row;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    const SafeTensor& t = *ck.tensors.at(p.hf_name);
    const int64_t cols = p.cols == 0 ? p.rows : p.cols;
    const int64_t rows = p.cols == 0 ? 1 : p.rows;
    const uint64_t rb = row_bytes(p.type, cols);
    row.resize(cols);
    // Rows go out in batches of about 4 MiB so the output buffer stays small.
    const int64_t batch = std::max<int64_t>(1, (int64_t{4} << 20) / static_cast<int64_t>(rb));
    for (int64_t r0 = 0; r0 < rows; r0 += batch) {
      const int64_t n = std::min(batch, rows - r0);
      out.resize(rb * n);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t src =
            p.permute_heads > 0 ? source_row(r0 + r, rows, p.permute_heads) : r0 + r;
        safetensor_to_f32(t, static_cast<uint64_t>(src * cols), cols, row.data());
        quantize_row(p.type, row.data(), out.data() + r * rb, cols);
      }
      w.write_tensor_data(out);
    }
    ck.file_of.at(p.hf_name)->release(t);
    done_bytes += t.n_bytes;
    if (progress)
      progress({static_cast<int64_t>(i + 1), static_cast<int64_t>(plan.size()), done_bytes,
                total_bytes});
  }
  w.finish();
}

}  // namespace strata
