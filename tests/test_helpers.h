// Shared helpers for tests that need model files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "offline/bundle.h"
#include "offline/profile.h"
#include "offline/synth.h"
#include "planning/model_inventory.h"
#include "runtime/session.h"

namespace strata::testing {

// RAM every plan holds before its FFN part: fixed parts, output, dense blocks and KV caches.
inline uint64_t ram_before_ffn(const Inventory& inv) {
  uint64_t ram = inv.fixed_ram_bytes + inv.output_bytes;
  for (const auto& l : inv.layers) ram += l.dense_bytes + l.kv_bytes;
  return ram;
}

// The logits after five fixed tokens of the model in `path`, its FFN run in `mode`.
inline std::vector<float> last_logits(const std::string& path, FfnMode mode) {
  auto m = Model::load(path, false);
  ThreadPool pool(2);
  SessionOptions o;
  o.ffn = mode;
  Session s(*m, 64, pool, o);
  const int32_t tokens[] = {1, 17, 200, 3, 99};
  const auto l = s.eval(tokens);
  return {l.begin(), l.end()};
}

// Unique per process: ctest runs test cases as parallel processes.
inline std::string temp_file(const std::string& name) {
  return std::string(::testing::TempDir()) + "strata_" + std::to_string(::getpid()) + "_" + name;
}

// A file of the repository: STRATA_SOURCE_DIR from the environment where set (binaries run in
// another checkout: scripts/gpu_check.sh), else the source tree they were built from.
inline std::string source_file(const std::string& relative) {
  const char* root = std::getenv("STRATA_SOURCE_DIR");
  return std::string(root != nullptr ? root : STRATA_SOURCE_DIR) + "/" + relative;
}

inline std::string data_file(const std::string& name) {
  return std::string(STRATA_SOURCE_DIR) + "/tests/data/" + name;
}

// max |a - b| / max |a| over two runs' logits (sizes must agree).
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    scale = std::max<double>(scale, std::abs(a[i]));
    diff = std::max<double>(diff, std::abs(a[i] - b[i]));
  }
  return diff / scale;
}

// n token ids drawn uniformly from m's vocabulary.
inline std::vector<int32_t> random_tokens(const Model& m, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(m.config.n_vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = id(rng);
  return t;
}

// `path` copied with keys set (or, with a null value, removed) and F32 vectors added.
inline std::string with_keys(const std::string& path, const std::string& name,
                      const std::map<std::string, std::optional<GgufValue>>& keys,
                      const std::map<std::string, std::vector<float>>& vectors = {}) {
  const auto src = GgufFile::open(path);
  const std::string out = temp_file(name);
  GgufWriter w(out);
  for (const auto& [k, v] : src->metadata())
    if (!keys.contains(k)) w.set(k, v);
  for (const auto& [k, v] : keys)
    if (v) w.set(k, *v);
  for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, t.dims);
  for (const auto& [n, v] : vectors) w.add_tensor(n, DType::F32, {static_cast<int64_t>(v.size())});
  for (const auto& t : src->tensors()) w.write_tensor_data({t.data, t.n_bytes});
  for (const auto& [n, v] : vectors)
    w.write_tensor_data({reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)});
  w.finish();
  return out;
}

// A tiny random model written once per (type, ffn) and reused.
// The logits of each token decoded alone, in order, in a fresh session of 32 positions.
inline std::vector<float> decode_one_by_one(const Model& m, std::span<const int32_t> tokens) {
  ThreadPool pool(2);
  Session s(m, 32, pool);
  std::vector<float> all;
  for (int32_t t : tokens) {
    const auto l = s.eval(t);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

inline std::string tiny_model(DType type, FfnActivation ffn, bool tied = false) {
  const std::string path = temp_file(std::string("tiny_") + dtype_name(type) + "_" +
                                     ffn_activation_name(ffn) + (tied ? "_tied" : "") + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.type = type;
  s.shape.ffn = ffn;
  s.tied_output = tied;
  s.seed = 3;
  write_synthetic_model(s, path);
  return path;
}

// A tiny model of another architecture (falcon, opt, qwen2, qwen3; qwen3moe with 8 experts, 2
// a token), with its own FFN (gelu for Falcon, relu for OPT, swiglu for Qwen, unless `ffn`
// says otherwise) and n_head_kv KV heads.
inline std::string tiny_arch_model(const std::string& arch, int64_t n_head_kv = 2,
                                   std::optional<FfnActivation> ffn = std::nullopt) {
  const Architecture* a = find_architecture(arch);
  const FfnActivation variant = ffn.value_or(a->ffn);
  const std::string path = temp_file("tiny_" + arch + "_" + ffn_activation_name(variant) + "_" +
                                     std::to_string(n_head_kv) + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.architecture = arch;
  s.shape.arch = a;
  s.shape.ffn = variant;
  s.shape.n_head_kv = n_head_kv;
  if (a->always_experts) s.shape.n_expert = 8, s.shape.n_expert_used = 2;
  s.seed = 5;
  write_synthetic_model(s, path);
  return path;
}

// A tiny mixture of experts (strata synth --arch mixtral): n_expert experts, k per token,
// stacked in 3-D tensors or one tensor per expert. Written once per variant.
inline std::string tiny_moe_model(DType type = DType::F32, bool stacked = true,
                                  int64_t n_expert = 4, int64_t k = 2,
                                  FfnActivation ffn = FfnActivation::SwiGLU) {
  const std::string path =
      temp_file(std::string("moe_") + dtype_name(type) + (stacked ? "_stacked_" : "_split_") +
                std::to_string(n_expert) + "_" + std::to_string(k) + "_" +
                ffn_activation_name(ffn) + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.type = type;
  s.shape.ffn = ffn;
  s.shape.n_expert = n_expert;
  s.shape.n_expert_used = k;
  s.stacked_experts = stacked;
  s.seed = 11;
  write_synthetic_model(s, path);
  return path;
}

// A profile of 96 fixed tokens (strata profile's counts), for plans that place by heat.
inline ActivationCounts profile_counts(const Model& m) {
  ThreadPool pool(2);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 96; ++i) tokens.push_back((i * 37 + 11) % static_cast<int>(m.config.n_vocab));
  NeuronProfile p = profile_model(m, tokens, 32, 96, pool);
  ActivationCounts a;
  a.tokens = p.tokens;
  a.counts = std::move(p.counts);
  a.window_reuse = std::move(p.window_reuse);
  return a;
}

// A TurboSparse-like tiny mixture: 3 layers of 4 dReLU experts (n_ff 256), 2 a token, sparse
// by construction (density 0.1) with predictors of rank 32 over every expert's neurons.
inline std::string sparse_moe_tiny_model(DType type) {
  const std::string path = temp_file(std::string("moe_sparse_drelu_") + dtype_name(type) + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.type = type;
  s.shape.n_embd = 128, s.shape.n_ff = 256, s.shape.n_layer = 3;
  s.shape.ffn = FfnActivation::DReLU;
  s.shape.n_expert = 4, s.shape.n_expert_used = 2;
  s.density = 0.1, s.predictor_rank = 32, s.seed = 6;
  write_synthetic_model(s, path);
  return path;
}

// A tiny model whose FFN is sparse by construction (strata synth --sparsity 0.2), with
// predictors of rank 32 and ffn_down_t: 3 layers, n_ff 256. Written once per variant.
inline std::string sparse_tiny_model(DType type, FfnActivation ffn, uint64_t seed,
                                     bool powerinfer = false, bool keep_down = false) {
  const std::string path = temp_file(
      std::string("sparse_") + dtype_name(type) + "_" + ffn_activation_name(ffn) + "_" +
      std::to_string(seed) + (powerinfer ? "_pwri" : "") + (keep_down ? "_down" : "") + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.type = type;
  s.shape.ffn = ffn;
  s.shape.n_ff = 256;
  s.shape.n_layer = 3;
  s.density = 0.2;
  s.predictor_rank = 32;
  s.powerinfer_layout = powerinfer;
  s.keep_down = keep_down;
  s.seed = seed;
  write_synthetic_model(s, path);
  return path;
}

// A small model whose rows are whole K-quant super-blocks (256 values; the tiny preset's are
// 64): 2 layers, n_embd 256, n_ff 512; with `density`, a ReGLU FFN sparse by construction with
// predictors of rank 32. Written once per variant.
inline std::string kquant_tiny_model(DType type, double density = 0) {
  const std::string path = temp_file(std::string("kquant_") + dtype_name(type) +
                                     (density > 0 ? "_sparse" : "") + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.type = type;
  s.shape.n_embd = 256;
  s.shape.n_ff = 512;
  s.shape.n_layer = 2;
  if (density > 0) {
    s.shape.ffn = FfnActivation::ReGLU;
    s.density = density;
    s.predictor_rank = 32;
  }
  s.seed = 4;
  write_synthetic_model(s, path);
  return path;
}

// The model at `path` rewritten with its FFN as neuron bundles (the flash tier), beside it.
inline std::string bundled_model(const std::string& path) {
  const auto m = Model::load(path, false, LoadMode::Map);
  const std::string out = path + ".bundle";
  write_bundled_model(*m, out);
  return out;
}

// Logits of a session on `backend`: the prompt's (every position, one batch) as the first row,
// then each decoded token's (one at a time).
inline std::vector<std::vector<float>> prompt_and_decode_logits(const Model& m, Backend& backend,
                                                                const SessionOptions& o,
                                                                const std::vector<int32_t>& prompt,
                                                                const std::vector<int32_t>& decode,
                                                                int64_t n_ctx = 64) {
  Session s(m, n_ctx, backend, o);
  std::vector<std::vector<float>> out;
  const auto all = s.eval(prompt, /*all_logits=*/true);
  out.emplace_back(all.begin(), all.end());
  for (int32_t t : decode) {
    const auto l = s.eval(t);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

}  // namespace strata::testing
