// `strata convert`'s readers of a Hugging Face directory on arbitrary JSON: the first input byte
// picks the file (config.json, tokenizer.json or model.safetensors.index.json), the rest is its
// text; the other files are a valid tiny checkpoint made at start-up. Conversion either writes
// a GGUF file that strata loads, or fails with strata::Error.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/input_file.h"
#include "fuzz_util.h"
#include "model/model.h"
#include "offline/convert.h"

namespace {

using nlohmann::json;

struct Fixture {
  std::string dir;
  std::string files[3] = {"config.json", "tokenizer.json", "model.safetensors.index.json"};
  std::string valid[3];
};

// A LLaMA checkpoint of vocab 100, width 32, one layer, 2 heads (1 KV head), FFN 64.
std::vector<std::pair<std::string, std::vector<int64_t>>> tensor_shapes() {
  const std::string l = "model.layers.0.";
  return {{"model.embed_tokens.weight", {100, 32}},
          {"model.norm.weight", {32}},
          {"lm_head.weight", {100, 32}},
          {l + "input_layernorm.weight", {32}},
          {l + "self_attn.q_proj.weight", {32, 32}},
          {l + "self_attn.k_proj.weight", {16, 32}},
          {l + "self_attn.v_proj.weight", {16, 32}},
          {l + "self_attn.o_proj.weight", {32, 32}},
          {l + "post_attention_layernorm.weight", {32}},
          {l + "mlp.gate_proj.weight", {64, 32}},
          {l + "mlp.up_proj.weight", {64, 32}},
          {l + "mlp.down_proj.weight", {32, 64}}};
}

void write_shard(const std::string& path) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, shape] : tensor_shapes()) {
    uint64_t n = 4;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const uint64_t len = h.size();
  std::memcpy(bytes.data(), &len, 8);
  bytes += h;
  std::vector<float> values(offset / 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) * 0.01f;
  bytes.append(reinterpret_cast<const char*>(values.data()), offset);
  strata::write_text_file(path, bytes);
}

Fixture make_fixture() {
  Fixture f;
  f.dir = strata::fuzz::scratch_dir("convert");
  f.valid[0] = json{
      {"architectures", {"LlamaForCausalLM"}},
      {"hidden_size", 32},
      {"intermediate_size", 64},
      {"num_hidden_layers", 1},
      {"num_attention_heads", 2},
      {"num_key_value_heads", 1},
      {"vocab_size", 100},
      {"max_position_embeddings", 64},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"hidden_act", "silu"},
      {"bos_token_id", 1},
      {"eos_token_id",
       2}}.dump();
  json vocab = json::object();
  for (int i = 0; i < 96; ++i)
    vocab[std::string(1, static_cast<char>(33 + i % 94)) + (i >= 94 ? "x" : "")] = i;
  f.valid[1] = json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "c d"}}}},
                    {"pre_tokenizer", {{"type", "ByteLevel"}}},
                    {"added_tokens", {{{"id", 96}, {"content", "<s>"}, {"special", true}}}}}
                   .dump();
  json map = json::object();
  for (const auto& [name, shape] : tensor_shapes()) map[name] = "model-1.safetensors";
  f.valid[2] = json{{"metadata", json::object()}, {"weight_map", map}}.dump();
  for (int i = 0; i < 3; ++i) strata::write_text_file(f.dir + "/" + f.files[i], f.valid[i]);
  write_shard(f.dir + "/model-1.safetensors");
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture f = make_fixture();
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const std::string path = f.dir + "/" + f.files[which];
  strata::write_text_file(path, std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  strata::ConvertOptions o;
  o.input_dir = f.dir;
  o.output = f.dir + "/out.gguf";
  o.recipe = strata::QuantRecipe::F32;
  try {
    strata::convert_hf_to_gguf(o);
    strata::Model::load(o.output, /*require_tokenizer=*/true, strata::LoadMode::Map);
  } catch (const strata::Error&) {
  }
  strata::write_text_file(path, f.valid[which]);
  return 0;
}
