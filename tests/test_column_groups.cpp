// Q8_0, Q4_0 and K-quant (Q2_K..Q6_K) column-group copies (tensor/column_groups.h,
// model/column_group_copy.h): the copy holds the file's values, the kernels equal the scalar one
// bit for bit, and input-sparse products through the copy equal the dense product of the
// thresholded input (the same integer sums; only the float additions in another order), the
// same bits for any thread count.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/sparse_ops.h"
#include "core/thread_pool.h"
#include "model/column_group_copy.h"
#include "tensor/column_groups.h"
#include "tensor/half.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

struct QuantMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // what the stored weights represent
  MatrixView view;
};

QuantMatrix quantized_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& x : v) x = dist(rng);
  QuantMatrix m;
  const uint64_t rb = row_bytes(type, static_cast<uint64_t>(cols));
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  m.values.resize(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, v.data() + r * cols, m.bytes.data() + r * rb, cols);
    dequantize_row(type, m.bytes.data() + r * rb, m.values.data() + r * cols, cols);
  }
  m.view = {type, m.bytes.data(), cols, rows, rb};
  return m;
}

QuantMatrix q8_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  return quantized_matrix(DType::Q8_0, rows, cols, seed);
}

TEST(ColumnGroups, PositionsAreAnInvolutionWithinEachChunk) {
  for (int64_t i = 0; i < 3 * kColumnChunk; ++i) {
    const int64_t p = column_group_position(i);
    EXPECT_EQ(p / kColumnChunk, i / kColumnChunk);
    EXPECT_EQ(column_group_position(p), i);
  }
  // Outputs 16k + 4l + t at 16l + 4k + t.
  EXPECT_EQ(column_group_position(16 * 1 + 4 * 2 + 3), 16 * 2 + 4 * 1 + 3);
}

TEST(ColumnGroups, TheCopyHoldsTheFileValuesOfEveryPart) {
  // Q8_0: 34 bytes per 32 weights, Q4_0: 18, as the file.
  for (const auto& [type, bytes] : {std::pair{DType::Q8_0, 34u}, std::pair{DType::Q4_0, 18u}}) {
    // q, k and v of one input, stacked: 128 + 64 + 64 outputs of 96 inputs.
    const QuantMatrix q = quantized_matrix(type, 128, 96, 1), k = quantized_matrix(type, 64, 96, 2),
                      v = quantized_matrix(type, 64, 96, 3);
    const MatrixView parts[3] = {q.view, k.view, v.view};
    ASSERT_TRUE(column_groups_apply(parts));
    std::vector<uint8_t> copy(column_groups_copy_bytes(parts));
    EXPECT_EQ(copy.size(), 3u * column_group_bytes(type, 256));
    EXPECT_EQ(copy.size(), 256u * 96 / 32 * bytes);
    const MatrixView c = build_column_groups(parts, copy.data());
    EXPECT_EQ(c.layout, Layout::ColumnGroups);
    EXPECT_EQ(c.rows, 96);
    EXPECT_EQ(c.cols, 256);
    EXPECT_EQ(c.bytes(), copy.size());
    int64_t out = 0;
    for (const QuantMatrix* m : {&q, &k, &v})
      for (int64_t r = 0; r < m->view.rows; ++r, ++out)
        for (int64_t j = 0; j < 96; ++j)
          ASSERT_EQ(column_group_weight(c, out, j), m->values[static_cast<size_t>(r * 96 + j)])
              << dtype_name(type) << " " << out << " " << j;
  }
}

TEST(ColumnGroups, OnlyWholeBlocksAndChunksHaveCopies) {
  const QuantMatrix a = q8_matrix(64, 64, 4), b = q8_matrix(32, 64, 5);
  EXPECT_TRUE(column_groups_apply(std::span(&a.view, 1)));
  const MatrixView odd[2] = {a.view, b.view};  // 96 outputs: not whole chunks of 64
  EXPECT_FALSE(column_groups_apply(odd));
  MatrixView other = a.view;
  other.type = DType::Q4_1;  // no column-group copies of it
  EXPECT_FALSE(column_groups_apply(std::span(&other, 1)));
  const QuantMatrix q4 = quantized_matrix(DType::Q4_0, 64, 64, 7);
  EXPECT_TRUE(column_groups_apply(std::span(&q4.view, 1)));
  const MatrixView mixed[2] = {a.view, q4.view};  // one type per copy
  EXPECT_FALSE(column_groups_apply(mixed));
  MatrixView interleaved = a.view;
  interleaved.layout = Layout::Interleaved16;
  EXPECT_FALSE(column_groups_apply(std::span(&interleaved, 1)));
  const MatrixView missing[2] = {a.view, MatrixView{}};
  EXPECT_FALSE(column_groups_apply(missing));
  const QuantMatrix narrow = q8_matrix(64, 32, 6);  // other inputs than `a`
  const MatrixView differ[2] = {a.view, narrow.view};
  EXPECT_FALSE(column_groups_apply(differ));
  EXPECT_FALSE(column_groups_apply({}));
  EXPECT_FALSE(column_groups_fit(DType::Q8_0, 64, 48));
  EXPECT_TRUE(column_groups_fit(DType::Q4_0, 64, 64));
  EXPECT_FALSE(column_groups_fit(DType::Q4_0, 64, 48));
  EXPECT_FALSE(column_groups_fit(DType::Q4_0, 32, 64));
  EXPECT_FALSE(column_groups_fit(DType::Q4_K, 64, 128));  // not whole super-blocks
  EXPECT_TRUE(column_groups_fit(DType::Q4_K, 64, 512));
  EXPECT_TRUE(column_groups_fit(DType::Q6_K, 128, 256));
  EXPECT_TRUE(column_groups_fit(DType::Q5_K, 64, 256));
  EXPECT_FALSE(column_groups_fit(DType::Q6_K, 64, 256));  // Q6_K's outputs go by 128
  EXPECT_FALSE(column_groups_fit(DType::Q3_K, 64, 256));  // Q3_K's outputs go by 128
  EXPECT_TRUE(column_groups_fit(DType::Q3_K, 128, 256));
  EXPECT_TRUE(column_groups_fit(DType::Q2_K, 64, 256));
  EXPECT_FALSE(column_groups_fit(DType::Q2_K, 64, 128));
}

// Q8_0 or Q4_0 group kernels over rows of random bytes: the scalar one against the formula in
// double (the quants unpacked here by hand: Q8_0's int8 at output i's position p, Q4_0's low
// nibble of the chunk's byte p for p < 32 or the high one of byte p - 32, minus 8), every table
// against the scalar one bit for bit.
void expect_group_kernels_equal_the_scalar_one(DType type) {
  const bool q4 = type == DType::Q4_0;
  std::mt19937 rng(q4 ? 12 : 11);
  std::uniform_int_distribution<int> byte(0, 255), value(-127, 127);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = 256;
  std::vector<std::vector<uint8_t>> rows(32,
                                         std::vector<uint8_t>(static_cast<size_t>(q4 ? n / 2 : n)));
  for (auto& r : rows)
    for (auto& q : r) q = static_cast<uint8_t>(byte(rng));
  rows[3][7] = q4 ? 0xf0 : 0x80;  // the extreme quants (Q8_0 -128; Q4_0 0 and 15) count exactly
  auto quant = [&](const uint8_t* row, int64_t i) {
    const int64_t pos = column_group_position(i), c = pos % kColumnChunk;
    if (!q4) return static_cast<int>(static_cast<int8_t>(row[pos]));
    const uint8_t b = row[(pos - c) / 2 + c % 32];
    return (c < 32 ? b & 15 : b >> 4) - 8;
  };
  auto axpy = [&](const CpuKernels& k, const std::vector<const uint8_t*>& p,
                  const std::vector<int8_t>& xq, const uint16_t* scales, float* y,
                  const uint8_t* const* next) {
    const int n_rows = static_cast<int>(p.size());
    if (q4) return k.axpy_q4_0_group(p.data(), xq.data(), n_rows, scales, 0.03f, y, n, next);
    std::vector<const int8_t*> p8, next8;
    for (const uint8_t* r : p) p8.push_back(reinterpret_cast<const int8_t*>(r));
    for (int r = 0; next != nullptr && r < 8; ++r)
      next8.push_back(reinterpret_cast<const int8_t*>(next[r]));
    k.axpy_q8_0_group(p8.data(), xq.data(), n_rows, scales, 0.03f, y, n,
                      next != nullptr ? next8.data() : nullptr);
  };
  std::vector<uint16_t> scales(static_cast<size_t>(n));
  for (auto& s : scales) s = f32_to_f16(std::abs(dist(rng)) * 0.01f);
  for (int n_rows : {1, 3, 4, 7, 32}) {
    std::vector<const uint8_t*> p;
    std::vector<int8_t> xq;
    for (int r = 0; r < n_rows; ++r) {
      p.push_back(rows[static_cast<size_t>((r * 5) % 32)].data());
      xq.push_back(static_cast<int8_t>(r == 0 ? -127 : value(rng)));
    }
    std::vector<float> start(static_cast<size_t>(n));
    for (auto& y : start) y = dist(rng);
    std::vector<float> want = start;
    axpy(scalar_kernels(), p, xq, scales.data(), want.data(), nullptr);
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int r = 0; r < n_rows; ++r)
        sum +=
            static_cast<double>(xq[static_cast<size_t>(r)]) * quant(p[static_cast<size_t>(r)], i);
      const double expect =
          start[static_cast<size_t>(i)] +
          sum * 0.03 * static_cast<double>(f16_to_f32(scales[static_cast<size_t>(i)]));
      EXPECT_NEAR(want[static_cast<size_t>(i)], expect, 1e-5 * (1 + std::abs(expect)))
          << dtype_name(type);
    }
    for (const CpuKernels* k : supported_kernels()) {
      std::vector<float> got = start;
      const uint8_t* next[8];
      for (int r = 0; r < 8; ++r) next[r] = rows[static_cast<size_t>(r)].data();
      axpy(*k, p, xq, scales.data(), got.data(), next);
      EXPECT_EQ(got, want) << dtype_name(type) << " " << kernels_label(*k) << " " << n_rows;
    }
  }
}

TEST(ColumnGroups, EveryKernelEqualsTheScalarOneBitForBit) {
  expect_group_kernels_equal_the_scalar_one(DType::Q8_0);
  expect_group_kernels_equal_the_scalar_one(DType::Q4_0);
}

// Block b's 32 quants of a Q8_0 or Q4_0 row as the weights' integers (Q4_0: q - 8) and its scale.
std::pair<std::array<int, kQK>, float> block_quants(const QuantMatrix& w, int64_t row, int64_t b) {
  std::array<int, kQK> q{};
  if (w.view.type == DType::Q8_0) {
    const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w.view.row(row))[b];
    for (int t = 0; t < kQK; ++t) q[static_cast<size_t>(t)] = blk.qs[t];
    return {q, f16_to_f32(blk.d)};
  }
  const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w.view.row(row))[b];
  for (int t = 0; t < kQK; ++t)
    q[static_cast<size_t>(t)] = (t < 16 ? blk.qs[t] & 15 : blk.qs[t - 16] >> 4) - 8;
  return {q, f16_to_f32(blk.d)};
}

// The dense Q8_0 (Q4_0) product of x (zero outside `ids`), as the row-major kernels compute it: x
// quantized per block of 32 (quantize_row_q8_0_activations), integer sums, scales; in double.
std::vector<double> dense_q8_0(const QuantMatrix& w, const std::vector<int32_t>& ids,
                               const float* c) {
  const int64_t n_in = w.view.cols;
  std::vector<float> x(static_cast<size_t>(n_in), 0.0f);
  for (size_t k = 0; k < ids.size(); ++k) x[static_cast<size_t>(ids[k])] = c[k];
  std::vector<BlockQ8_0> xq(static_cast<size_t>(n_in / kQK));
  quantize_row_q8_0_activations(x.data(), xq.data(), n_in);
  std::vector<double> y(static_cast<size_t>(w.view.rows), 0.0);
  for (int64_t i = 0; i < w.view.rows; ++i)
    for (int64_t g = 0; g < n_in / kQK; ++g) {
      const auto [q, d] = block_quants(w, i, g);
      int32_t sum = 0;
      for (int t = 0; t < kQK; ++t)
        sum += q[static_cast<size_t>(t)] * xq[static_cast<size_t>(g)].qs[t];
      y[static_cast<size_t>(i)] += double{d} * f16_to_f32(xq[static_cast<size_t>(g)].d) * sum;
    }
  return y;
}

// About half the inputs that `may` allows, ascending, and `batch` tokens' values over them, a
// fifth of them zero (a token's own dropped values).
template <class May>
std::pair<std::vector<int32_t>, std::vector<float>> half_the_inputs(int64_t n_in, int64_t batch,
                                                                    uint32_t seed, May may) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution pick(0.5), zero(0.2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<int32_t> ids;
  for (int32_t j = 0; j < n_in; ++j)
    if (may(j) && pick(rng)) ids.push_back(j);
  std::vector<float> coef(static_cast<size_t>(batch) * ids.size());
  for (auto& v : coef) v = zero(rng) ? 0.0f : dist(rng);
  return {ids, coef};
}

TEST(ColumnGroups, ProductsEqualTheDenseProductOfTheThresholdedInput) {
  // W: 192 outputs of 640 inputs; its copy: 640 rows of 192. Two tokens' values over a list of
  // about half the inputs, some zero (a token's own dropped values).
  const int64_t n_out = 192, n_in = 640, batch = 2;
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const QuantMatrix w = quantized_matrix(type, n_out, n_in, 21);
    std::vector<uint8_t> copy(column_groups_copy_bytes(std::span(&w.view, 1)));
    const MatrixView c = build_column_groups(std::span(&w.view, 1), copy.data());
    const auto [ids, coef] = half_the_inputs(n_in, batch, 5, [](int32_t) { return true; });
    std::vector<float> first;
    for (const CpuKernels* k : supported_kernels())
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> out(static_cast<size_t>(batch * n_out), -1.0f);
        axpy_rows(*k, c, ids, coef.data(), static_cast<int64_t>(ids.size()), batch, out.data(),
                  n_out, pool);
        for (int64_t b = 0; b < batch; ++b) {
          const std::vector<double> want = dense_q8_0(w, ids, coef.data() + b * ids.size());
          double scale = 0;
          for (double v : want) scale = std::max(scale, std::abs(v));
          for (int64_t i = 0; i < n_out; ++i)
            ASSERT_NEAR(out[static_cast<size_t>(b * n_out + i)], want[static_cast<size_t>(i)],
                        1e-5 * scale)
                << dtype_name(type) << " " << kernels_label(*k) << " token " << b << " output "
                << i;
        }
        // Every variant and thread count: the same bits.
        if (first.empty()) first = out;
        EXPECT_EQ(out, first) << dtype_name(type) << " " << kernels_label(*k) << " " << threads
                              << " threads";
      }
  }
}

TEST(ColumnGroups, KQuantCopiesHoldTheFileValuesOfEveryPart) {
  // Q4_K: 148 bytes per 256 weights (the file: 144); Q5_K: 180 (176); Q6_K: 210, as the file.
  // Q2_K: 100 (84); Q3_K: 114 (110).
  for (const auto& [type, bytes] :
       {std::pair{DType::Q4_K, 148u}, std::pair{DType::Q5_K, 180u}, std::pair{DType::Q6_K, 210u},
        std::pair{DType::Q2_K, 100u}, std::pair{DType::Q3_K, 114u}}) {
    // gate and up of one input, stacked: 128 + 64 outputs (Q6_K, Q3_K: 128 + 128, outputs by 128)
    // of 512 inputs (two super-blocks).
    const bool by_128 = type == DType::Q6_K || type == DType::Q3_K;
    const int64_t n_up = by_128 ? 128 : 64, n_out = 128 + n_up;
    const QuantMatrix gate = quantized_matrix(type, 128, 512, 7);
    const QuantMatrix up = quantized_matrix(type, n_up, 512, 8);
    const MatrixView parts[2] = {gate.view, up.view};
    ASSERT_TRUE(column_groups_apply(parts));
    std::vector<uint8_t> copy(column_groups_copy_bytes(parts));
    EXPECT_EQ(copy.size(), 2u * static_cast<uint64_t>(n_out) * bytes) << dtype_name(type);
    const MatrixView c = build_column_groups(parts, copy.data());
    EXPECT_EQ(c.type, type);
    EXPECT_EQ(c.layout, Layout::ColumnGroups);
    EXPECT_EQ(c.rows, 512);
    EXPECT_EQ(c.cols, n_out);
    EXPECT_EQ(c.bytes(), copy.size());
    int64_t out = 0;
    for (const QuantMatrix* m : {&gate, &up})
      for (int64_t r = 0; r < m->view.rows; ++r, ++out)
        for (int64_t j = 0; j < 512; ++j)
          ASSERT_EQ(column_group_weight(c, out, j), m->values[static_cast<size_t>(r * 512 + j)])
              << dtype_name(type) << " " << out << " " << j;
  }
  // Mixed types are not one copy; Q6_K's outputs go by 128.
  const QuantMatrix q4 = quantized_matrix(DType::Q4_K, 64, 512, 9);
  const QuantMatrix q6 = quantized_matrix(DType::Q6_K, 64, 512, 9);
  const MatrixView mixed[2] = {q4.view, q6.view};
  EXPECT_FALSE(column_groups_apply(mixed));
  EXPECT_FALSE(column_groups_apply(std::span(&q6.view, 1)));
  const QuantMatrix q3 = quantized_matrix(DType::Q3_K, 64, 512, 9);
  EXPECT_FALSE(column_groups_apply(std::span(&q3.view, 1)));  // Q3_K's too
}

TEST(ColumnGroups, EveryKQuantKernelEqualsTheScalarOneBitForBit) {
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K}) {
    const KColumnLayout layout = k_column_layout(type);
    // Q6_K and Q3_K: signed scales, no mins, values offset by 32 and 4.
    const bool no_min = !layout.has_min;
    const int offset = type == DType::Q6_K ? 32 : type == DType::Q3_K ? 4 : 0;
    auto axpy = [&](const CpuKernels& k) { return k.axpy_k_super(type); };
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> byte(0, 255), six(0, 63), value(-127, 127);
    std::uniform_int_distribution<int> signed_scale(-128, 127);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t n = 4096 + 320;  // a whole block of sums and 5 chunks more
    const auto row_bytes = static_cast<size_t>(layout.row_bytes(n));
    std::vector<std::vector<uint8_t>> rows(32, std::vector<uint8_t>(row_bytes));
    for (auto& r : rows)
      for (auto& q : r) q = static_cast<uint8_t>(byte(rng));
    std::fill(rows[3].begin(), rows[3].begin() + 48, uint8_t{0xff});  // the largest values
    std::vector<uint16_t> d(static_cast<size_t>(n)), dmin(d.size());
    for (size_t i = 0; i < d.size(); ++i) {
      d[i] = f32_to_f16(std::abs(dist(rng)) * 0.01f);
      dmin[i] = f32_to_f16(std::abs(dist(rng)) * 0.01f);
    }
    const auto n_groups_max = static_cast<size_t>(layout.groups());
    std::vector<std::vector<uint8_t>> sc(n_groups_max, std::vector<uint8_t>(d.size()));
    std::vector<std::vector<uint8_t>> mins = sc;
    for (size_t g = 0; g < sc.size(); ++g)
      for (size_t i = 0; i < d.size(); ++i) {
        sc[g][i] = static_cast<uint8_t>(no_min ? signed_scale(rng) : six(rng));
        if (g == 0 && i == 5) sc[g][i] = no_min ? 0x80 : 63;  // the extreme scales
        mins[g][i] = static_cast<uint8_t>(six(rng));
      }
    // Super-blocks of 1, 3 and all groups of 1..group size kept rows each.
    std::vector<int> all;
    for (size_t g = 0; g < n_groups_max; ++g)
      all.push_back(1 + static_cast<int>(g * 5) % static_cast<int>(layout.group));
    all.back() = static_cast<int>(layout.group);
    for (const std::vector<int>& sizes : {std::vector<int>{4}, std::vector<int>{1, 7, 16}, all}) {
      std::vector<std::vector<const uint8_t*>> p(sizes.size());
      std::vector<std::vector<int8_t>> xq(sizes.size());
      std::vector<KColumnTerms> groups;
      for (size_t g = 0; g < sizes.size(); ++g) {
        int32_t xsum = 0;
        for (int r = 0; r < sizes[g]; ++r) {
          p[g].push_back(rows[static_cast<size_t>((r * 7 + static_cast<int>(g)) % 32)].data());
          xq[g].push_back(static_cast<int8_t>(r == 0 && g == 0 ? -127 : value(rng)));
          xsum += xq[g].back();
        }
        groups.push_back({p[g].data(), xq[g].data(), sizes[g], sc[g].data(),
                          no_min ? nullptr : mins[g].data(), xsum});
      }
      const int n_groups = static_cast<int>(groups.size());
      std::vector<float> start(static_cast<size_t>(n));
      for (auto& y : start) y = dist(rng);
      std::vector<float> want = start;
      axpy(scalar_kernels())(groups.data(), n_groups, d.data(), no_min ? nullptr : dmin.data(),
                             0.03f, want.data(), n, nullptr);
      // The scalar kernel against the formula in double.
      for (int64_t i = 0; i < n; ++i) {
        const auto u = static_cast<size_t>(i);
        double isum = 0, imin = 0;
        for (const KColumnTerms& t : groups) {
          double acc = 0;
          for (int r = 0; r < t.n_rows; ++r)
            acc += static_cast<double>(t.xq[r]) * k_column_quant(type, t.rows[r], i);
          const double scale = no_min ? static_cast<int8_t>(t.sc[u]) : t.sc[u];
          isum += acc * scale;
          imin += (no_min ? offset * scale : static_cast<double>(t.m[u])) * t.xsum;
        }
        const double expect =
            start[u] + 0.03 * (isum * f16_to_f32(d[u]) -
                               imin * (no_min ? f16_to_f32(d[u]) : f16_to_f32(dmin[u])));
        EXPECT_NEAR(want[u], expect, 1e-5 * (1 + std::abs(expect))) << dtype_name(type);
      }
      for (const CpuKernels* k : supported_kernels()) {
        std::vector<float> got = start;
        const uint8_t* next[8];
        for (int r = 0; r < 8; ++r) next[r] = rows[static_cast<size_t>(r)].data();
        axpy (*k)(groups.data(), n_groups, d.data(), no_min ? nullptr : dmin.data(), 0.03f,
                  got.data(), n, next);
        EXPECT_EQ(got, want) << kernels_label(*k) << " " << dtype_name(type) << " " << n_groups
                             << " groups";
      }
    }
  }
}

// The dense K-quant product of x (zero outside `ids`) as the row-major kernels compute it: x
// quantized per super-block (quantize_row_q8_K), each row's dot_kq.
std::vector<float> dense_kquant(const CpuKernels& k, const QuantMatrix& w,
                                const std::vector<int32_t>& ids, const float* c) {
  const int64_t n_in = w.view.cols;
  std::vector<float> x(static_cast<size_t>(n_in), 0.0f);
  for (size_t j = 0; j < ids.size(); ++j) x[static_cast<size_t>(ids[j])] = c[j];
  std::vector<BlockQ8_K> xq(static_cast<size_t>(n_in / kQK_K));
  quantize_row_q8_K(x.data(), xq.data(), n_in);
  std::vector<float> y(static_cast<size_t>(w.view.rows));
  for (int64_t i = 0; i < w.view.rows; ++i)
    y[static_cast<size_t>(i)] = k.dot_kq[kquant_slot(w.view.type)](w.view.row(i), xq.data(), n_in);
  return y;
}

TEST(ColumnGroups, KQuantProductsAreTheRowMajorProductOfTheThresholdedInputBitForBit) {
  // W: 192 (Q6_K, Q3_K 256) outputs of 768 inputs (three super-blocks); two tokens over about half
  // the inputs, some values zero; one super-block with no listed input at all.
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K}) {
    const bool by_128 = type == DType::Q6_K || type == DType::Q3_K;
    const int64_t n_out = by_128 ? 256 : 192, n_in = 768, batch = 2;
    const QuantMatrix w = quantized_matrix(type, n_out, n_in, 22);
    std::vector<uint8_t> copy(column_groups_copy_bytes(std::span(&w.view, 1)));
    const MatrixView c = build_column_groups(std::span(&w.view, 1), copy.data());
    const auto [ids, coef] =
        half_the_inputs(n_in, batch, 6, [](int32_t j) { return j < 256 || j >= 512; });
    std::vector<float> first;
    for (const CpuKernels* k : supported_kernels())
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> out(static_cast<size_t>(batch * n_out), -1.0f);
        axpy_rows(*k, c, ids, coef.data(), static_cast<int64_t>(ids.size()), batch, out.data(),
                  n_out, pool);
        // The same bits as the row-major product: the same integers, the same float steps.
        for (int64_t b = 0; b < batch; ++b) {
          const std::vector<float> want = dense_kquant(*k, w, ids, coef.data() + b * ids.size());
          const std::vector<float> got(out.begin() + b * n_out, out.begin() + (b + 1) * n_out);
          ASSERT_EQ(got, want) << k->name << " " << dtype_name(type) << " token " << b;
        }
        if (first.empty()) first = out;
        EXPECT_EQ(out, first) << k->name << " " << threads << " threads";
      }
  }
}

}  // namespace
}  // namespace strata
