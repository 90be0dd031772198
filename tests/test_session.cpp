// The forward pass: thread-count independence, incremental decoding, context limits.
#include <gtest/gtest.h>

#include <fstream>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/matvec.h"
#include "core/error.h"
#include "generation/perplexity.h"
#include "runtime/session.h"
#include "runtime/workspace.h"
#include "test_helpers.h"

namespace strata {
namespace {

using strata::testing::decode_one_by_one;
using strata::testing::tiny_model;

const std::vector<int32_t> kTokens = {1, 5, 200, 17, 3, 99, 42};

std::vector<std::vector<float>> run_all(const Model& m, int threads) {
  ThreadPool pool(threads);
  Session s(m, 64, pool);
  std::vector<std::vector<float>> out;
  for (int32_t t : kTokens) {
    auto logits = s.eval(t);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

TEST(Session, LogitsIdenticalAcrossThreadCounts) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const auto m = Model::load(tiny_model(type, FfnActivation::SwiGLU), false);
    const auto one = run_all(*m, 1);
    EXPECT_EQ(one, run_all(*m, 2)) << dtype_name(type);
    EXPECT_EQ(one, run_all(*m, 3)) << dtype_name(type);
  }
}

// Prompt batches go through tile kernels (register tiles for float weights, AMX for quantized
// ones where the CPU has it) whose sums are split differently from the single-token dot
// kernels': the logits agree within rounding. (Interleaved Q4_0/Q8_0 agree exactly: below.)
TEST(Session, BatchedEvaluationMatchesTokenByToken) {
  // More than one batch of Session::kMaxBatch.
  std::vector<int32_t> tokens;
  for (int i = 0; i < Session::kMaxBatch + 13; ++i) tokens.push_back((i * 37 + 11) % 256);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const auto m = Model::load(tiny_model(type, FfnActivation::ReGLU), false);
    ThreadPool pool(2);
    Session one(*m, 128, pool), batch(*m, 128, pool);
    std::vector<float> sequential;
    for (int32_t t : tokens) {
      auto l = one.eval(t);
      sequential.insert(sequential.end(), l.begin(), l.end());
    }
    auto all = batch.eval(tokens, /*all_logits=*/true);
    float scale = 0;
    for (float v : sequential) scale = std::max(scale, std::fabs(v));
    // Quantized weights read Q8_0-quantized activations: a rounding difference may flip one
    // activation value's quantization (one step of 1/127 of its block's maximum), which moves
    // that token's logits visibly and, through the KV cache, later tokens' slightly (seen once
    // in 77 tokens). Float weights: rounding only.
    const int64_t v = m->config.n_vocab;
    for (size_t t = 0; t < tokens.size(); ++t) {
      float diff = 0;
      for (int64_t i = 0; i < v; ++i)
        diff = std::max(diff, std::fabs(sequential[t * v + i] - all[t * v + i]));
      ASSERT_LT(diff, (needs_q8_input(type) ? 0.05f : 1e-4f) * scale)
          << dtype_name(type) << " token " << t;
    }
    // ReGLU zeros are exact zeros of the gate; a value within rounding of 0 may flip.
    const auto zb = batch.ffn_zeros(), zo = one.ffn_zeros();
    ASSERT_EQ(zb.size(), zo.size());
    for (size_t i = 0; i < zo.size(); ++i)
      EXPECT_NEAR(static_cast<double>(zb[i]), static_cast<double>(zo[i]),
                  0.001 * static_cast<double>(zo[i]))
          << dtype_name(type) << " layer " << i;
    // Without all_logits only the last token's logits come back (its output product then runs
    // as a single-token one).
    Session last(*m, 128, pool);
    auto l = last.eval(tokens);
    ASSERT_EQ(static_cast<int64_t>(l.size()), m->config.n_vocab);
    for (int64_t v = 0; v < m->config.n_vocab; ++v)
      ASSERT_NEAR(l[v], all[all.size() - m->config.n_vocab + v], 1e-5f * scale)
          << dtype_name(type) << " " << v;
  }
}

// Interleaved Q4_0/Q8_0 (the CPU backend's layout, Model::adopt_layouts) computes what the scalar
// reference computes on every path, so a prompt batch and token-by-token decoding give the same
// logits bit for bit, and both agree with the file's row layout (SIMD dot kernels) within rounding.
TEST(Session, InterleavedRowsMatchRowLayoutAndBatchesExactly) {
  for (DType type : {DType::Q4_0, DType::Q8_0}) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 21; ++i) tokens.push_back((i * 29 + 7) % 256);
    const std::string path = tiny_model(type, FfnActivation::SwiGLU);
    const auto rows = Model::load(path, false);
    const auto inter = Model::load(path, false);
    // 2 layers x (q, k, v, o, gate, up, down) + output.
    const auto cpu = [](const MatrixView& m, WeightUse use) {
      return CpuBackend::layout_for(m, use, /*repack=*/true);
    };
    EXPECT_EQ(inter->adopt_layouts(cpu, /*dense_ffn=*/true), 15);
    EXPECT_EQ(inter->adopt_layouts(cpu, true), 0);  // already done
    EXPECT_EQ(Model::load(path, false, LoadMode::Map)->adopt_layouts(cpu, true), 0);
    // --no-repack, and a sparse FFN (rows read one by one) keep the file's rows there.
    const auto keep = [](const MatrixView& m, WeightUse use) {
      return CpuBackend::layout_for(m, use, /*repack=*/false);
    };
    EXPECT_EQ(Model::load(path, false)->adopt_layouts(keep, true), 0);
    EXPECT_EQ(Model::load(path, false)->adopt_layouts(cpu, /*dense_ffn=*/false), 9);
    ThreadPool pool(2);
    Session a(*rows, 64, pool), one(*inter, 64, pool), batch(*inter, 64, pool);
    std::vector<float> reference, sequential;
    for (int32_t t : tokens) {
      auto l = a.eval(t);
      reference.insert(reference.end(), l.begin(), l.end());
      l = one.eval(t);
      sequential.insert(sequential.end(), l.begin(), l.end());
    }
    auto all = batch.eval(tokens, /*all_logits=*/true);
    EXPECT_EQ(sequential, std::vector<float>(all.begin(), all.end()));
    float scale = 0;
    for (float v : reference) scale = std::max(scale, std::fabs(v));
    // Rounding differences of 1e-7 -- unless one flips the Q8_0 rounding of an activation value
    // (one step of 1/127 of its block's maximum), which moves that token's logits visibly. Seen
    // once in these 21 tokens; allow two.
    int flipped = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      float diff = 0;
      for (int64_t v = 0; v < inter->config.n_vocab; ++v) {
        const size_t i = t * inter->config.n_vocab + v;
        diff = std::max(diff, std::fabs(reference[i] - sequential[i]));
      }
      EXPECT_LT(diff, 0.05f * scale) << "token " << t;
      flipped += diff > 1e-5f * scale;
    }
    EXPECT_LE(flipped, 2);
  }
}

TEST(Session, BatchesOfQuantizedWeightsIdenticalAcrossThreadCounts) {
  // Batched quantized products (AMX tiles where the CPU has them; their equality with the
  // scalar kernel is Kernels.AmxProductsEqualScalarKernelBitForBit) do not depend on the
  // thread count.
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back((i * 13 + 5) % 256);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const auto m = Model::load(tiny_model(type, FfnActivation::ReGLU), false);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Session s(*m, 64, pool);
      auto all = s.eval(tokens, true);
      results.emplace_back(all.begin(), all.end());
    }
    EXPECT_EQ(results[0], results[1]) << dtype_name(type);
    EXPECT_EQ(results[0], results[2]) << dtype_name(type);
  }
}

TEST(Session, F16KvCacheHalvesTheCacheAndStaysCloseToF32) {
  const auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  ThreadPool pool(2);
  const auto tokens = m->tokenizer->encode("In the beginning God created the heaven", true);
  auto logits = [&](DType k, DType v, bool batched, uint64_t* bytes) {
    SessionOptions o;
    o.kv = {k, v};
    Session s(*m, 64, pool, o);
    *bytes = s.kv_cache_bytes();
    std::vector<float> out;
    if (batched) {
      auto l = s.eval(std::span<const int32_t>(tokens));
      out.assign(l.begin(), l.end());
    } else {
      for (int32_t t : tokens) {
        auto l = s.eval(t);
        out.assign(l.begin(), l.end());
      }
    }
    return out;
  };
  uint64_t f32_bytes = 0, f16_bytes = 0, mixed_bytes = 0;
  const auto f32 = logits(DType::F32, DType::F32, false, &f32_bytes);
  const auto f16 = logits(DType::F16, DType::F16, false, &f16_bytes);
  const auto mixed = logits(DType::F16, DType::F32, false, &mixed_bytes);
  EXPECT_EQ(f16_bytes * 2, f32_bytes);
  EXPECT_EQ(mixed_bytes * 4, f32_bytes * 3);
  EXPECT_EQ(f32_bytes, Session::kv_cache_bytes(m->config, 64, DType::F32, DType::F32));
  float max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(f16[i] - f32[i]));
    max_abs = std::max(max_abs, std::fabs(f32[i]));
  }
  EXPECT_GT(max_diff, 0.0f);             // the rounding is in effect
  EXPECT_LT(max_diff, 2e-3f * max_abs);  // and small
  EXPECT_NE(mixed, f32);
  // Batches store and read the same F16 values as single tokens.
  uint64_t unused = 0;
  const auto batched = logits(DType::F16, DType::F16, true, &unused);
  for (size_t i = 0; i < f16.size(); ++i) EXPECT_NEAR(batched[i], f16[i], 1e-3f * max_abs);
  SessionOptions bad;
  bad.kv.k = DType::Q5_1;
  EXPECT_THROW(Session(*m, 64, pool, bad), Error);
}

// llama.cpp's -ctk/-ctv q8_0 and q4_0: 34 and 18 bytes for 32 values, the planned bytes what the
// session holds, logits close to F32's, and held-out perplexity with q8_0 within 0.5% of F32's.
TEST(Session, BlockKvCachesHoldLlamaCppsBlocksAndStayCloseToF32) {
  const auto m = Model::load(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny.gguf");
  ThreadPool pool(2);
  const auto tokens = m->tokenizer->encode("In the beginning God created the heaven and the earth", true);
  auto run = [&](DType t, uint64_t* bytes) {
    SessionOptions o;
    o.kv = {t, t};
    Session s(*m, 64, pool, o);
    *bytes = s.kv_cache_bytes();
    auto l = s.eval(std::span<const int32_t>(tokens));
    return std::vector<float>(l.begin(), l.end());
  };
  uint64_t f32_bytes = 0, f16_bytes = 0, q8_bytes = 0, q4_bytes = 0;
  const auto f32 = run(DType::F32, &f32_bytes);
  run(DType::F16, &f16_bytes);
  const auto q8 = run(DType::Q8_0, &q8_bytes);
  const auto q4 = run(DType::Q4_0, &q4_bytes);
  EXPECT_EQ(q8_bytes * 32, f16_bytes * 17);  // 34 bytes for 32 values against 64
  EXPECT_EQ(q4_bytes * 32, f16_bytes * 9);
  EXPECT_EQ(q8_bytes, Session::kv_cache_bytes(m->config, 64, DType::Q8_0, DType::Q8_0));
  float max_abs = 0, q8_diff = 0, q4_diff = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(f32[i]));
    q8_diff = std::max(q8_diff, std::fabs(q8[i] - f32[i]));
    q4_diff = std::max(q4_diff, std::fabs(q4[i] - f32[i]));
  }
  EXPECT_GT(q8_diff, 0.0f);
  EXPECT_LT(q8_diff, 2e-2f * max_abs);
  EXPECT_LT(q4_diff, 1e-1f * max_abs);
  EXPECT_GT(q4_diff, q8_diff);
  // Held-out perplexity (llama.cpp's method, 6 windows of 256 tokens: under ASan 20 took 54 s).
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny-heldout.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto ids = m->tokenizer->encode(text, true);
  const auto ppl = [&](DType t) {
    SessionOptions o;
    o.kv = {t, t};
    Session s(*m, 256, pool, o);
    return measure_perplexity(s, ids, m->tokenizer->bos(), 6).perplexity;
  };
  const double base = ppl(DType::F32), with_q8 = ppl(DType::Q8_0);
  EXPECT_NE(with_q8, base);
  EXPECT_LT(std::fabs(with_q8 / base - 1), 0.005) << base << " " << with_q8;
}

TEST(Session, ResetReproducesTheSameLogits) {
  const auto m = Model::load(tiny_model(DType::Q8_0, FfnActivation::ReGLU), false);
  ThreadPool pool(2);
  Session s(*m, 16, pool);
  auto first = s.eval(std::span<const int32_t>(kTokens));
  const std::vector<float> a(first.begin(), first.end());
  s.reset();
  auto second = s.eval(std::span<const int32_t>(kTokens));
  EXPECT_EQ(a, std::vector<float>(second.begin(), second.end()));
  EXPECT_EQ(s.n_past(), static_cast<int64_t>(kTokens.size()));
}

TEST(Session, EarlierTokensChangeLaterLogits) {
  // Attention must actually read the cache: a different first token changes the last logits.
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  ThreadPool pool(1);
  Session a(*m, 8, pool), b(*m, 8, pool);
  a.eval(1);
  b.eval(2);
  auto la = a.eval(7);
  std::vector<float> va(la.begin(), la.end());
  auto lb = b.eval(7);
  EXPECT_NE(va, std::vector<float>(lb.begin(), lb.end()));
}

// A model with Mistral's sliding window (synth --sliding-window W) and the same weights without.
std::unique_ptr<Model> windowed_model(int64_t window) {
  const std::string path =
      strata::testing::temp_file("swa_" + std::to_string(window) + ".gguf");
  SynthSpec s = synth_preset("tiny");
  s.shape.n_head_kv = 2;
  s.shape.sliding_window = window;
  s.seed = 4;
  write_synthetic_model(s, path);
  return Model::load(path, false);
}

// Sliding-window attention: a token sees its last W positions, so a window as long as the
// sequence is full attention bit for bit, the first W tokens are unchanged by any window and
// later ones change; a prompt batch (and two sequences in one batch) equals one token at a time
// within the batch kernels' rounding. The logits against PyTorch: check_logits.py (mistral-swa).
TEST(Session, ASlidingWindowSeesTheLastPositionsOnly) {
  const std::vector<int32_t> tokens = {1, 5, 200, 17, 3, 99, 42, 7, 150, 8, 64, 33};
  const auto full = windowed_model(0), wide = windowed_model(12), narrow = windowed_model(4);
  EXPECT_EQ(narrow->config.sliding_window, 4);
  const std::vector<float> a = decode_one_by_one(*full, tokens);
  EXPECT_EQ(decode_one_by_one(*wide, tokens), a);
  const std::vector<float> b = decode_one_by_one(*narrow, tokens);
  const size_t v = static_cast<size_t>(full->config.n_vocab);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 4 * v, b.begin())) << "the first 4 tokens";
  EXPECT_FALSE(std::equal(a.begin() + 4 * v, a.end(), b.begin() + 4 * v)) << "the later ones";
  ThreadPool pool(2);
  Session batch(*narrow, 32, pool);
  const auto all = batch.eval(tokens, /*all_logits=*/true);
  float scale = 0, diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(b[i] - all[i]));
  }
  EXPECT_LT(diff, 1e-5f * scale) << "a prompt batch";
  SessionOptions two;
  two.n_seq = 2;
  Session mixed(*narrow, 16, pool, two);
  std::vector<BatchToken> interleaved;
  for (size_t i = 0; i < 12; ++i)
    interleaved.push_back({tokens[i / 2 + (i % 2) * 6], static_cast<int32_t>(i % 2), true});
  const auto l = mixed.decode(interleaved);
  const std::vector<float> first_half = decode_one_by_one(*narrow, std::span(tokens).first(6));
  for (size_t i = 0; i < 6; ++i)  // sequence 0's tokens are the batch's even rows
    for (size_t k = 0; k < v; ++k)
      ASSERT_NEAR(l[2 * i * v + k], first_half[i * v + k], 1e-5f * scale) << i;
}

// The CPU's attention keeps its scores in registers: a session on the CPU holds no score
// scratch (64 x n_head x n_ctx floats, at a long context the largest buffer), so its memory
// grows with the context by the KV cache alone.
TEST(Session, OnTheCpuTheContextCostsTheKvCacheAlone) {
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  ThreadPool pool(1);
  const auto held = [&](int64_t n_ctx) {
    Session s(*m, n_ctx, pool);
    return s.backend().allocated();
  };
  const ModelConfig& c = m->config;
  const uint64_t kv_row = static_cast<uint64_t>(2 * c.n_layer * c.n_head_kv * c.head_dim) * 4;
  EXPECT_EQ(held(256) - held(128), 128 * kv_row);
  WorkspaceShape shape = WorkspaceShape::of(c, 256, Session::kMaxBatch, FfnMode::Dense, false, 0);
  const uint64_t with_scores = Workspace::bytes(shape);
  shape.attention_scores = false;
  EXPECT_EQ(with_scores - Workspace::bytes(shape),
            static_cast<uint64_t>(Session::kMaxBatch * c.n_head * 256) * 4);
}

TEST(Session, FullContextAndBadTokenAreErrors) {
  const auto m = Model::load(tiny_model(DType::F32, FfnActivation::SwiGLU), false);
  ThreadPool pool(1);
  Session s(*m, 2, pool);
  s.eval(1);
  s.eval(2);
  EXPECT_THROW(s.eval(3), Error);
  Session t(*m, 2, pool);
  EXPECT_THROW(t.eval(-1), Error);
  EXPECT_THROW(t.eval(static_cast<int32_t>(m->config.n_vocab)), Error);
}

}  // namespace
}  // namespace strata
