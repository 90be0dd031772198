// The unit types (tensor/unit_quants.h): decoding bit for bit as llama.cpp's ggml decodes the
// same blocks (tests/data/ggml_blocks.bin, written by bench/llamacpp/ggml_blocks.py from
// llama.cpp v0.5.0's own quantizer and dequantizers, random bit patterns included), strata's
// quantizers' round-trip error, and every SIMD kernel against the scalar reference bit for bit
// (dot, gathered dot, multi-token dot, axpy), the dot against a float reference within the
// activation's rounding, and the matrix paths that reach them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "core/thread_pool.h"
#include "model/down_transpose.h"
#include "model/model.h"
#include "offline/synth.h"
#include "runtime/session.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"
#include "tensor/unit_quants.h"
#include "test_helpers.h"

namespace strata {
namespace {

struct GgmlRow {
  DType type;
  int64_t n;
  std::vector<uint8_t> blocks;
  std::vector<float> values;
};

std::vector<GgmlRow> ggml_rows() {
  std::ifstream f(testing::data_file("ggml_blocks.bin"), std::ios::binary);
  EXPECT_TRUE(f) << "tests/data/ggml_blocks.bin is missing";
  char magic[4];
  uint32_t count = 0;
  f.read(magic, 4).read(reinterpret_cast<char*>(&count), 4);
  EXPECT_EQ(std::string(magic, 4), "SGBK");
  std::vector<GgmlRow> rows;
  for (uint32_t i = 0; i < count && f; ++i) {
    uint32_t head[3];
    f.read(reinterpret_cast<char*>(head), sizeof head);
    GgmlRow r{static_cast<DType>(head[0]), head[1], std::vector<uint8_t>(head[2]),
              std::vector<float>(head[1])};
    f.read(reinterpret_cast<char*>(r.blocks.data()), head[2]);
    f.read(reinterpret_cast<char*>(r.values.data()), head[1] * 4);
    rows.push_back(std::move(r));
  }
  EXPECT_EQ(rows.size(), count);
  return rows;
}

TEST(UnitQuants, DecodeEqualsLlamaCppBitForBit) {
  std::map<DType, int> seen;
  for (const GgmlRow& r : ggml_rows()) {
    ASSERT_TRUE(is_unit_type(r.type)) << dtype_name(r.type);
    ASSERT_EQ(r.blocks.size(), row_bytes(r.type, static_cast<uint64_t>(r.n)));
    std::vector<float> y(static_cast<size_t>(r.n));
    dequantize_row(r.type, r.blocks.data(), y.data(), r.n);
    for (int64_t i = 0; i < r.n; ++i)
      ASSERT_EQ(std::memcmp(&y[i], &r.values[i], 4), 0)
          << dtype_name(r.type) << " row " << seen[r.type] << " value " << i << ": strata " << y[i]
          << ", llama.cpp " << r.values[i];
    ++seen[r.type];
  }
  for (const DType t : kUnitTypeList) EXPECT_EQ(seen[t], 4) << dtype_name(t) << " rows checked";
}

std::vector<float> gaussian(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

// Relative RMS error of strata's quantizers on gaussian rows; bounds a few percent above what
// each type measured (docs/QUANTIZATION.md).
TEST(UnitQuants, QuantizersRoundTrip) {
  const std::map<DType, double> bound = {
      {DType::Q4_1, 0.082},
      {DType::Q5_0, 0.045},
      {DType::Q5_1, 0.040},
      {DType::IQ4_NL, 0.078},
      {DType::IQ4_XS, 0.079},
      {DType::MXFP4, 0.120},
      {DType::NVFP4, 0.110},
      // Ternary and 1-/2-bit: for models trained to them; on gaussian values coarse by design.
      {DType::TQ1_0, 0.82},
      {DType::TQ2_0, 0.82},
      {DType::Q1_0, 0.62},
      {DType::Q2_0, 0.74}};
  const int64_t n = 4096;
  const std::vector<float> x = gaussian(n, 3);
  for (const auto& [t, limit] : bound) {
    ASSERT_TRUE(has_unit_quantizer(t));
    std::vector<uint8_t> q(row_bytes(t, n));
    std::vector<float> y(n);
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) err += (y[i] - x[i]) * (y[i] - x[i]), norm += x[i] * x[i];
    const double rel = std::sqrt(err / norm);
    std::printf("%s: relative RMS error %.4f\n", dtype_name(t), rel);
    EXPECT_LT(rel, limit) << dtype_name(t);
    EXPECT_GT(rel, 0.2 * limit) << dtype_name(t) << ": suspiciously exact";
  }
  for (const DType t : {DType::IQ2_XS, DType::IQ1_M})  // the lattice types: iq_quantize.h
    EXPECT_FALSE(has_unit_quantizer(t)) << dtype_name(t);
}

// The lattice types' quantizers (tensor/iq_quantize.h, iq1_quantize.h) on 64 gaussian rows of
// 4096 with an importance per column: relative RMS error within 2% of what they gave when
// written (llama.cpp v0.5.0's own quantizers give IQ2_XXS 0.3485, IQ2_XS 0.3051, IQ2_S 0.2525,
// IQ3_XXS 0.1856, IQ3_S 0.1389, IQ1_S 0.4951, IQ1_M 0.4631 on these rows, shrinking them;
// strata's keep each block's weighted projection, which costs up to 6% of RMS error:
// docs/QUANTIZATION.md), the values not shrunk or grown (sum(x y) / sum(x x) within 1.5% of 1;
// llama.cpp's: 0.975, 0.990, 0.996, 0.995, 1.020, 0.951, 0.954), and the importance heeded: the
// columns it weighs most come out more exact than without it.
TEST(IqQuants, QuantizersKeepTheValuesAndHeedTheImportance) {
  const std::map<DType, double> measured = {{DType::IQ2_XXS, 0.3596}, {DType::IQ2_XS, 0.3071},
                                            {DType::IQ2_S, 0.2554},   {DType::IQ3_XXS, 0.1870},
                                            {DType::IQ3_S, 0.1356},   {DType::IQ1_S, 0.5237},
                                            {DType::IQ1_M, 0.4722}};
  const int64_t n = 4096, rows = 64;
  std::vector<float> x, importance(n);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> row = gaussian(n, 100 + r);
    x.insert(x.end(), row.begin(), row.end());
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.5f, 2.5f);
  for (float& v : importance) v = u(rng);
  for (const auto& [t, rms] : measured) {
    const DTypeInfo& info = dtype_info(t);
    ASSERT_NE(info.quantize_importance, nullptr) << info.name;
    const uint64_t rb = row_bytes(t, n);
    std::vector<uint8_t> q(rb * rows), plain(rb * rows);
    std::vector<float> y(x.size()), y_plain(x.size());
    for (int r = 0; r < rows; ++r) {
      info.quantize_importance(x.data() + r * n, q.data() + r * rb, n, importance.data());
      info.quantize(x.data() + r * n, plain.data() + r * rb, n);
      dequantize_row(t, q.data() + r * rb, y.data() + r * n, n);
      dequantize_row(t, plain.data() + r * rb, y_plain.data() + r * n, n);
    }
    double err = 0, norm = 0, heavy = 0, heavy_plain = 0, xy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]), norm += x[i] * x[i], xy += x[i] * y[i];
      if (importance[i % n] > 2.0f) {
        heavy += (y[i] - x[i]) * (y[i] - x[i]);
        heavy_plain += (y_plain[i] - x[i]) * (y_plain[i] - x[i]);
      }
    }
    const double rel = std::sqrt(err / norm);
    std::printf("%s: relative RMS error %.4f, gain %.4f\n", info.name, rel, xy / norm);
    EXPECT_LT(rel, 1.02 * rms) << info.name;
    EXPECT_GT(rel, 0.5 * rms) << info.name << ": suspiciously exact";
    EXPECT_NEAR(xy / norm, 1.0, 0.015) << info.name << ": the values shrink or grow";
    EXPECT_LT(heavy, heavy_plain) << info.name << ": the importance is not heeded";
  }
}

// Rows of a unit type to multiply, n values each: the fixture's rows of the type (llama.cpp's
// quantized rows, and with `random_bits` its rows of random bytes too) one after the other.
std::vector<uint8_t> rows_of(DType t, int64_t n, int rows, bool random_bits = true) {
  std::vector<uint8_t> pool;
  int of_type = 0;
  for (const GgmlRow& g : ggml_rows())
    if (g.type == t && (random_bits || of_type++ < 3))
      pool.insert(pool.end(), g.blocks.begin(), g.blocks.end());
  // Whole blocks, in a shuffled order so rows differ.
  const size_t block = dtype_info(t).block_bytes, n_pool = pool.size() / block;
  std::vector<uint8_t> out(row_bytes(t, n) * rows);
  for (size_t b = 0; b < out.size() / block; ++b)
    std::memcpy(out.data() + b * block, pool.data() + (b * 7 % n_pool) * block, block);
  return out;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0;
}

TEST(UnitKernels, EveryVariantEqualsTheScalarReference) {
  const int64_t n = 512;
  const int kRows = 6, kTokens = 5;
  const CpuKernels& ref = scalar_kernels();
  std::vector<std::vector<float>> xs;
  std::vector<PreparedInput> in(kTokens);
  for (int t = 0; t < kTokens; ++t) xs.push_back(gaussian(n, 40 + t, t == 0 ? 1e3f : 1.0f));
  for (int t = 0; t < kTokens; ++t) in[t].prepare(ref, xs[t].data(), n, true, true);
  UnitInput q8[kTokens];
  for (int t = 0; t < kTokens; ++t) q8[t] = {&in[t].q8(), in[t].q8k()};
  for (const DType type : kUnitTypeList) {
    const int slot = unit_slot(type);
    const std::vector<uint8_t> w = rows_of(type, n, kRows);
    const uint64_t rb = row_bytes(type, n);
    for (const CpuKernels* k : supported_kernels()) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " on " + kernels_label(*k));
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* row = w.data() + r * rb;
        float multi[kTokens], multi_ref[kTokens];
        k->dot_unit_multi[slot](row, q8, kTokens, n, multi);
        ref.dot_unit_multi[slot](row, q8, kTokens, n, multi_ref);
        for (int t = 0; t < kTokens; ++t) {
          const float want = ref.dot_unit[slot](row, q8[t], n);
          ASSERT_TRUE(same_bits(k->dot_unit[slot](row, q8[t], n), want)) << "row " << r;
          ASSERT_TRUE(same_bits(k->gather_dot_unit[slot](row, q8[t], n, w.data()), want));
          ASSERT_TRUE(same_bits(multi[t], want)) << "token " << t;
          ASSERT_TRUE(same_bits(multi_ref[t], want)) << "token " << t;
        }
      }
      // axpy over every row, with coefficients of both signs; the next rows requested.
      const void* rows[kRows];
      const void* next[2] = {w.data(), w.data() + rb};
      float c[kRows];
      for (int r = 0; r < kRows; ++r) rows[r] = w.data() + r * rb, c[r] = 0.5f - 0.3f * r;
      std::vector<float> y = gaussian(n, 9), y_ref = y;
      k->axpy_unit[slot](rows, c, kRows, y.data(), n, next, 2);
      ref.axpy_unit[slot](rows, c, kRows, y_ref.data(), n, nullptr, 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(y[i], y_ref[i])) << "axpy " << i;
    }
  }
}

// The scalar dot product is the dequantized row times the activation, within the rounding of
// the activation to its form (1/254 of the largest value of each Q8_0 block, or Q8_K
// super-block).
TEST(UnitKernels, DotIsTheDequantizedProduct) {
  const int64_t n = 1024;
  const std::vector<float> x = gaussian(n, 5);
  PreparedInput in;
  in.prepare(scalar_kernels(), x.data(), n, true, true);
  const UnitInput both{&in.q8(), in.q8k()};
  for (const DType type : kUnitTypeList) {
    const std::vector<uint8_t> w = rows_of(type, n, 1, false);
    std::vector<float> v(n);
    dequantize_row(type, w.data(), v.data(), n);
    const int span = dtype_info(type).input == ActivationForm::Q8_K ? 256 : 32;
    double exact = 0, bound = 0;
    for (int64_t i = 0; i < n; ++i) exact += double{v[i]} * x[i];
    for (int64_t b = 0; b < n / span; ++b) {
      float amax = 0;
      for (int j = 0; j < span; ++j) amax = std::max(amax, std::fabs(x[b * span + j]));
      for (int j = 0; j < span; ++j) bound += std::fabs(v[b * span + j]) * (amax / 254.0 + 1e-6);
    }
    const float got = scalar_kernels().dot_unit[unit_slot(type)](w.data(), both, n);
    EXPECT_NEAR(got, exact, bound * 1.01 + 1e-6 * std::fabs(exact)) << dtype_name(type);
  }
}

// matvec and the batched product reach the unit kernels: each output equals dot_unit of its row.
TEST(UnitKernels, MatrixProductsUseTheUnitKernels) {
  const int64_t n = 256, rows = 40;
  const CpuKernels& k = best_kernels();
  ThreadPool pool(2);
  std::vector<std::vector<float>> xs = {gaussian(n, 1), gaussian(n, 2), gaussian(n, 3)};
  std::vector<PreparedInput> in(3);
  for (size_t t = 0; t < 3; ++t) in[t].prepare(k, xs[t].data(), n, true, true);
  for (const DType type : {DType::Q5_1, DType::IQ4_XS, DType::MXFP4, DType::TQ2_0}) {
    const std::vector<uint8_t> w = rows_of(type, n, rows);
    const MatrixView m{type, w.data(), n, rows, row_bytes(type, n)};
    std::vector<float> y(rows), batch(3 * rows);
    matvec(k, m, xs[0].data(), y.data(), pool);
    const MatMatJob job{&m, batch.data(), rows};
    matmat_multi(k, {job}, in, pool);
    for (int64_t r = 0; r < rows; ++r) {
      const float want = k.dot_unit[unit_slot(type)](m.row(r), {&in[0].q8(), in[0].q8k()}, n);
      ASSERT_TRUE(same_bits(y[r], want)) << dtype_name(type) << " row " << r;
      for (int t = 0; t < 3; ++t)
        ASSERT_TRUE(same_bits(batch[t * rows + r],
                              k.dot_unit[unit_slot(type)](m.row(r), {&in[t].q8(), in[t].q8k()}, n)))
            << dtype_name(type) << " row " << r << " token " << t;
    }
  }
}

// Nibble types interleaved by 16 rows (tensor/interleaved_rows.h): the rows come back out as
// they went in, every variant's group kernel equals dot_unit of the plain rows bit for bit
// (with a last round of fewer than four chains), and matvec and the batched product read them.
TEST(UnitKernels, InterleavedGroupsEqualThePlainRowsBitForBit) {
  const int kRows = 32;
  ThreadPool pool(2);
  for (const DType type : kUnitTypeList) {
    if (!is_nibble_unit_type(type)) {
      EXPECT_FALSE(interleavable(type)) << dtype_name(type);
      continue;
    }
    const int slot = unit_slot(type);
    const int64_t block = dtype_info(type).block_size;
    for (const int64_t n : {block, 5 * block, 9 * block}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " n=" + std::to_string(n));
      const std::vector<uint8_t> w = rows_of(type, n, kRows);
      std::vector<uint8_t> g = w;
      interleave_rows16(type, g.data(), kRows, n);
      EXPECT_NE(g, w);
      const uint64_t rb = row_bytes(type, n), group_bytes = interleaved_group_bytes(type, n);
      ASSERT_EQ(group_bytes, 16 * rb);
      std::vector<uint8_t> row(rb);
      for (int r = 0; r < kRows; ++r) {
        extract_row16(type, g.data() + (r / 16) * group_bytes, n, r % 16, row.data());
        ASSERT_EQ(std::memcmp(row.data(), w.data() + r * rb, rb), 0) << "row " << r;
      }
      std::vector<std::vector<float>> xs = {gaussian(n, 3, 1e3f)};
      for (int t = 1; t < kGroupTokens + 1; ++t) xs.push_back(gaussian(n, 3 + t));
      std::vector<PreparedInput> in(xs.size());
      const bool q8k = dtype_info(type).input == ActivationForm::Q8_K;
      for (size_t t = 0; t < xs.size(); ++t)
        in[t].prepare(scalar_kernels(), xs[t].data(), n, !q8k, q8k);
      const UnitInput x{&in[0].q8(), in[0].q8k()};
      std::vector<UnitInput> units;
      for (const PreparedInput& p : in) units.push_back({&p.q8(), p.q8k()});
      for (const CpuKernels* k : supported_kernels()) {
        // Several tokens at once equal one at a time.
        for (int n_x = 1; n_x <= kGroupTokens; ++n_x) {
          std::vector<float> several(16 * n_x), one(16);
          std::vector<float*> outs;
          for (int t = 0; t < n_x; ++t) outs.push_back(several.data() + 16 * t);
          k->matmat_unit_x16[slot](g.data(), units.data() + 1, n_x, n / block, outs.data());
          for (int t = 0; t < n_x; ++t) {
            k->matvec_unit_x16[slot](g.data(), units[1 + t], n / block, one.data());
            for (int r = 0; r < 16; ++r)
              ASSERT_TRUE(same_bits(several[16 * t + r], one[r]))
                  << kernels_label(*k) << " " << n_x << " tokens, token " << t << " row " << r;
          }
        }
        float out[16];
        for (int group = 0; group < kRows / 16; ++group) {
          k->matvec_unit_x16[slot](g.data() + group * group_bytes, x, n / block, out);
          for (int r = 0; r < 16; ++r)
            ASSERT_TRUE(same_bits(
                out[r], scalar_kernels().dot_unit[slot](w.data() + (16 * group + r) * rb, x, n)))
                << kernels_label(*k) << " row " << 16 * group + r << " " << out[r] << " want "
                << scalar_kernels().dot_unit[slot](w.data() + (16 * group + r) * rb, x, n);
        }
      }
      const MatrixView plain{type, w.data(), n, kRows, rb};
      MatrixView m = plain;
      m.data = g.data(), m.layout = Layout::Interleaved16;
      std::vector<float> y(kRows), batch(xs.size() * kRows);
      matvec(best_kernels(), m, xs[0].data(), y.data(), pool);
      matmat_multi(best_kernels(), {MatMatJob{&m, batch.data(), kRows}}, in, pool);
      for (int r = 0; r < kRows; ++r) {
        ASSERT_TRUE(same_bits(y[r], dot_row(scalar_kernels(), plain, r, in[0]))) << "row " << r;
        ASSERT_TRUE(same_bits(dot_row(best_kernels(), m, r, in[0]), y[r])) << "row " << r;
        for (size_t t = 0; t < xs.size(); ++t)
          ASSERT_TRUE(same_bits(batch[t * kRows + r], dot_row(scalar_kernels(), plain, r, in[t])))
              << "row " << r << " token " << t;
      }
    }
  }
}

// A ReGLU model written in each writable unit type runs dense and sparse: its logits as near
// the F16 model's as a Q4_0 model's are (MXFP4, with power-of-two scales, within 1.5 times), and
// gate-first (the gathered rows, the down projection's axpy over ffn_down_t) equal to dense
// bit for bit (with ffn_down_t in the file, dense sums every neuron through the same axpy).
std::vector<float> model_logits(DType type, FfnMode mode) {
  SynthSpec s = synth_preset("tiny");
  s.shape.n_embd = 256, s.shape.n_ff = 512, s.shape.ffn = FfnActivation::ReGLU;
  s.type = type, s.density = 0.1, s.seed = 5;
  const std::string path = testing::temp_file(std::string("unit-") + dtype_name(type) + ".gguf");
  write_synthetic_model(s, path);
  return testing::last_logits(path, mode);
}

// The ternary and 1-/2-bit types: for models trained to them, so a model trained at full precision
// comes out far from itself (measured below), and their transposes are held as Q8_0.
bool low_bit(DType t) {
  return t == DType::TQ1_0 || t == DType::TQ2_0 || t == DType::Q1_0 || t == DType::Q2_0;
}

TEST(UnitTypes, ModelsRunDenseAndSparse) {
  const std::vector<float> f16 = model_logits(DType::F16, FfnMode::Dense);
  const double q4_0 = testing::relative_difference(f16, model_logits(DType::Q4_0, FfnMode::Dense));
  std::printf("Q4_0: vs F16 %.3g\n", q4_0);
  for (const DType t : kUnitTypeList) {
    if (!has_unit_quantizer(t)) continue;
    const std::vector<float> dense = model_logits(t, FfnMode::Dense);
    const double vs_f16 = testing::relative_difference(f16, dense);
    std::printf("%s: vs F16 %.3g\n", dtype_name(t), vs_f16);
    if (low_bit(t))  // 0.89-1.0 when written: far, but finite and no larger than the logits
      EXPECT_LT(vs_f16, 1.2) << dtype_name(t);
    else
      EXPECT_LT(vs_f16, (t == DType::MXFP4 ? 1.5 : 1.0) * q4_0) << dtype_name(t);
    EXPECT_GT(vs_f16, 0.0) << dtype_name(t) << ": the weights were not quantized";
    EXPECT_EQ(dense, model_logits(t, FfnMode::GateFirst)) << dtype_name(t);
  }
}

// A file's ffn_down of a unit type (no ffn_down_t in it) transposes for the sparse path: rows of
// the same type where strata writes it, a second rounding costs little (not the ternary and 1-
// or 2-bit types) and the rows are whole blocks, else Q8_0, each neuron's row the file's column
// within that type's rounding.
TEST(UnitTypes, DownProjectionsTransposeForTheSparsePath) {
  const int64_t n_ff = 256, n_embd = 64;
  for (const DType type : kUnitTypeList) {
    const std::vector<uint8_t> w = rows_of(type, n_ff, n_embd, false);
    const MatrixView down{type, w.data(), n_ff, n_embd, row_bytes(type, n_ff)};
    std::vector<uint8_t> storage;
    const MatrixView t = transpose_down(down, storage);
    const bool same =
        has_unit_quantizer(type) && !low_bit(type) && dtype_info(type).block_size <= n_embd;
    EXPECT_EQ(t.type, same ? type : DType::Q8_0) << dtype_name(type);
    ASSERT_EQ(t.rows, n_ff);
    ASSERT_EQ(t.cols, n_embd);
    std::vector<float> all(n_ff * n_embd), row(n_embd);
    for (int64_t r = 0; r < n_embd; ++r) dequantize_row(type, down.row(r), &all[r * n_ff], n_ff);
    double err = 0, norm = 0;
    for (int64_t c = 0; c < n_ff; ++c) {
      dequantize_row(t.type, t.row(c), row.data(), n_embd);
      for (int64_t r = 0; r < n_embd; ++r) {
        const double want = all[r * n_ff + c];
        err += (row[r] - want) * (row[r] - want), norm += want * want;
      }
    }
    EXPECT_LT(std::sqrt(err / norm), same ? 0.12 : 0.01) << dtype_name(type);
  }
}

}  // namespace
}  // namespace strata
