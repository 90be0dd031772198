// K-quants (tensor/kquants.h): the super-block layouts decoded from hand-built blocks, the
// quantizers' round-trip error per type (bounds below, also in docs/QUANTIZATION.md), and every
// SIMD kernel against the scalar reference: dot products and axpy bit for bit (the integer sums
// are exact and the float steps are the same operations in the same order), the dot product
// against a float reference within the Q8_K activation's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/cpu/kernels.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"
#include "tensor/kquants.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

const DType kKTypes[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<uint8_t> quantized(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantized(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// Q4_K by hand: sub-block j has scale j + 1 and min 2j (sub-blocks 4-7 use the split 6-bit
// encoding: scales 5..8 and mins 8..14 need no top bits, so set them to 33.. and 40.. instead).
TEST(KQuantLayout, Q4KScalesMinsAndNibbles) {
  BlockQ4_K b{};
  b.d = f32_to_f16(1.0f), b.dmin = f32_to_f16(0.5f);
  const int scale[8] = {1, 2, 3, 4, 33, 34, 35, 36}, min[8] = {0, 2, 4, 6, 40, 41, 42, 43};
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(scale[j] | ((scale[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(min[j] | ((min[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((scale[j + 4] & 15) | ((min[j + 4] & 15) << 4));
  }
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
  float y[256];
  dequantize_row(DType::Q4_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int c = i / 64, l = i % 32, j = i / 32;
    const int q = (i % 64) < 32 ? (32 * c + l) % 16 : 15 - (32 * c + l) % 16;
    ASSERT_EQ(y[i], static_cast<float>(scale[j] * q) - 0.5f * static_cast<float>(min[j])) << i;
  }
}

// Q6_K by hand: element 128n + 32k + l takes low bits from ql[64n + l + 32 (k % 2)] (nibble
// k / 2) and high bits 2k of qh[32n + l]; scale per 16 values; value - 32.
TEST(KQuantLayout, Q6KBitsAndSignedScales) {
  BlockQ6_K b{};
  b.d = f32_to_f16(0.25f);
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<int8_t>(g % 2 == 0 ? g + 1 : -(g + 1));
  std::mt19937 rng(3);
  int q[256];
  for (int i = 0; i < 256; ++i) {
    q[i] = static_cast<int>(rng() % 64);
    const int n = i / 128, k = (i / 32) % 4, l = i % 32;
    b.ql[64 * n + l + 32 * (k % 2)] |= static_cast<uint8_t>((q[i] & 15) << (4 * (k / 2)));
    b.qh[32 * n + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * k));
  }
  float y[256];
  dequantize_row(DType::Q6_K, &b, y, 256);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(y[i], 0.25f * static_cast<float>(b.scales[i / 16]) * static_cast<float>(q[i] - 32))
        << i;
}

// Q3_K by hand: 6-bit scales stored + 32 across 12 bytes; the third bit in hmask.
TEST(KQuantLayout, Q3KScalesAndHighBits) {
  BlockQ3_K b{};
  b.d = f32_to_f16(1.0f);
  int scale[16];
  for (int g = 0; g < 16; ++g) {
    scale[g] = g * 4 - 32;  // -32..28
    const int s = scale[g] + 32;
    if (g < 8)
      b.scales[g] |= static_cast<uint8_t>(s & 15);
    else
      b.scales[g - 8] |= static_cast<uint8_t>((s & 15) << 4);
    b.scales[8 + g % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (g / 4)));
  }
  int v[256];
  for (int i = 0; i < 256; ++i) {
    v[i] = (i * 7) % 8 - 4;  // -4..3
    const int u = v[i] + 4, n = i / 128, j = (i / 32) % 4, l = i % 32;
    b.qs[32 * n + l] |= static_cast<uint8_t>((u & 3) << (2 * j));
    if (u & 4) b.hmask[l] |= static_cast<uint8_t>(1 << (4 * n + j));
  }
  float y[256];
  dequantize_row(DType::Q3_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], static_cast<float>(scale[i / 16] * v[i])) << i;
}

// Q2_K and Q5_K by hand.
TEST(KQuantLayout, Q2KAndQ5K) {
  BlockQ2_K b2{};
  b2.d = f32_to_f16(2.0f), b2.dmin = f32_to_f16(1.0f);
  for (int g = 0; g < 16; ++g) b2.scales[g] = static_cast<uint8_t>((g % 16) | ((15 - g) << 4));
  for (int i = 0; i < 256; ++i)
    b2.qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((i % 4) << (2 * ((i / 32) % 4)));
  float y[256];
  dequantize_row(DType::Q2_K, &b2, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 16;
    ASSERT_EQ(y[i],
              2.0f * static_cast<float>(g) * static_cast<float>(i % 4) - static_cast<float>(15 - g))
        << i;
  }
  BlockQ5_K b5{};
  b5.d = f32_to_f16(1.0f), b5.dmin = f32_to_f16(0.0f);
  for (int j = 0; j < 4; ++j) b5.scales[j] = 1, b5.scales[j + 8] = 1;
  for (int i = 0; i < 256; ++i) {
    const int q = (i * 5) % 32;
    b5.qs[32 * (i / 64) + i % 32] |= static_cast<uint8_t>((q & 15) << ((i % 64) < 32 ? 0 : 4));
    if (q & 16) b5.qh[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
  }
  dequantize_row(DType::Q5_K, &b5, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], static_cast<float>((i * 5) % 32)) << i;
}

// Root-mean-square error of the round trip over gaussian data, relative to the data's RMS.
// Bounds (measured values in docs/QUANTIZATION.md): about 1.3x the measured error.
TEST(KQuantRoundTrip, ErrorWithinTheTypesBound) {
  const struct {
    DType type;
    double bound;
  } cases[] = {{DType::Q2_K, 0.34},  {DType::Q3_K, 0.19},  {DType::Q4_K, 0.092},
               {DType::Q5_K, 0.047}, {DType::Q6_K, 0.023}, {DType::Q8_K, 0.009}};
  const int64_t n = 256 * 64;
  const std::vector<float> x = gaussian(n, 7);
  for (const auto& c : cases) {
    const std::vector<float> y = dequantized(c.type, quantized(c.type, x), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) err += (y[i] - x[i]) * (y[i] - x[i]), ref += x[i] * x[i];
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, c.bound) << dtype_name(c.type);
    RecordProperty(dtype_name(c.type), std::to_string(rel));
  }
}

// Constant, zero and single-spike super-blocks: no NaN, zeros stay zero, the spike survives.
TEST(KQuantRoundTrip, DegenerateBlocks) {
  for (DType t : kKTypes) {
    std::vector<float> zeros(256, 0.0f), spike(256, 0.0f), flat(256, 0.75f);
    spike[77] = -3.0f;
    for (float v : dequantized(t, quantized(t, zeros), 256)) ASSERT_EQ(v, 0.0f) << dtype_name(t);
    const auto s = dequantized(t, quantized(t, spike), 256);
    EXPECT_NEAR(s[77], -3.0f, 0.2f) << dtype_name(t);
    for (float v : s) ASSERT_TRUE(std::isfinite(v));
    for (float v : dequantized(t, quantized(t, flat), 256))
      ASSERT_NEAR(v, 0.75f, 0.1f) << dtype_name(t);
  }
}

// Non-finite and huge inputs quantize without undefined behaviour (UBSan runs this) and leave
// the finite groups usable.
TEST(KQuantRoundTrip, NonFiniteInputsAreDefined) {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    std::vector<float> x = gaussian(512, 3);
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[40] = std::numeric_limits<float>::infinity();
    x[300] = 3e38f;
    const std::vector<float> y = dequantized(t, quantized(t, x), 512);
    ASSERT_EQ(y.size(), 512u) << dtype_name(t);
  }
}

TEST(KQuantRoundTrip, RowsMustBeWholeSuperBlocks) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(1000);
  try {
    quantize_row(DType::Q4_K, x.data(), q.data(), 300);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "row of 300 elements is not a multiple of the Q4_K block size 256");
  }
}

// Q8_K: the group sums are the sums of the quants.
TEST(KQuantRoundTrip, Q8KGroupSums) {
  const std::vector<float> x = gaussian(512, 9);
  std::vector<BlockQ8_K> b(2);
  quantize_row_q8_K(x.data(), b.data(), 512);
  for (const auto& blk : b)
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
      ASSERT_EQ(sum, blk.bsums[g]);
    }
}

TEST(KQuantKernels, EveryVariantEqualsTheScalarReferenceBitForBit) {
  const CpuKernels& ref = scalar_kernels();
  for (const CpuKernels* k : supported_kernels())
    for (DType t : kKTypes)
      for (int64_t n : {256, 768, 4096}) {
        const int slot = kquant_slot(t);
        const std::vector<uint8_t> w = quantized(t, gaussian(n, 100 + n));
        const std::vector<uint8_t> w2 = quantized(t, gaussian(n, 200 + n));
        const std::vector<float> x = gaussian(n, 300 + n);
        std::vector<BlockQ8_K> a(static_cast<size_t>(n / 256));
        quantize_row_q8_K(x.data(), a.data(), n);
        const float want = ref.dot_kq[slot](w.data(), a.data(), n);
        ASSERT_EQ(k->dot_kq[slot](w.data(), a.data(), n), want) << k->name << dtype_name(t) << n;
        ASSERT_EQ(k->gather_dot_kq[slot](w.data(), a.data(), n, w2.data()), want)
            << k->name << dtype_name(t);
        // Several tokens at once: each equal to its own product.
        std::vector<std::vector<BlockQ8_K>> xs;
        std::vector<const BlockQ8_K*> xp;
        for (int t = 0; t < 5; ++t) {
          xs.emplace_back(static_cast<size_t>(n / 256));
          quantize_row_q8_K(gaussian(n, 500 + t).data(), xs.back().data(), n);
        }
        for (const auto& v : xs) xp.push_back(v.data());
        float multi[5];
        k->dot_kq_multi[slot](w.data(), xp.data(), 5, n, multi);
        for (int j = 0; j < 5; ++j)
          ASSERT_EQ(multi[j], ref.dot_kq[slot](w.data(), xp[j], n)) << k->name << dtype_name(t);
        // Against floats: dequantized weights times the unquantized activation.
        const std::vector<float> wf = dequantized(t, w, n);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i)
          exact += double{wf[i]} * x[i], mag += std::abs(wf[i] * x[i]);
        ASSERT_NEAR(want, exact, 0.01 * mag) << dtype_name(t);
        // axpy of 1..9 rows (more than one register group), element for element.
        for (int rows : {1, 3, 9}) {
          std::vector<std::vector<uint8_t>> ws;
          std::vector<const void*> ptrs;
          std::vector<float> c;
          for (int r = 0; r < rows; ++r) {
            ws.push_back(quantized(t, gaussian(n, 400 + r)));
            c.push_back(0.5f - 0.25f * static_cast<float>(r));
          }
          for (const auto& v : ws) ptrs.push_back(v.data());
          std::vector<float> y_ref = gaussian(n, 9), y = y_ref;
          ref.axpy_kq[slot](ptrs.data(), c.data(), rows, y_ref.data(), n, nullptr, 0);
          k->axpy_kq[slot](ptrs.data(), c.data(), rows, y.data(), n, ptrs.data(), 1);
          ASSERT_EQ(y, y_ref) << k->name << " " << dtype_name(t) << " rows " << rows;
        }
      }
}

// Q4_K interleaved by 16 rows (tensor/interleaved_rows.h): every row comes back out as it went
// in, and the group kernel of every variant equals the scalar dot of each plain row bit for bit.
TEST(KQuantKernels, InterleavedQ4KGroupsEqualThePlainRowsBitForBit) {
  const int64_t rows = 32, n = 1024, rb = static_cast<int64_t>(row_bytes(DType::Q4_K, n));
  std::vector<uint8_t> plain(static_cast<size_t>(rows * rb));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> q = quantized(DType::Q4_K, gaussian(n, 600 + r));
    std::copy(q.begin(), q.end(), plain.begin() + r * rb);
  }
  std::vector<uint8_t> inter = plain;
  interleave_rows16(DType::Q4_K, inter.data(), rows, n);
  ASSERT_NE(inter, plain);
  const uint64_t gb = interleaved_group_bytes(DType::Q4_K, n);
  ASSERT_EQ(gb, static_cast<uint64_t>(16 * rb));
  std::vector<uint8_t> back(static_cast<size_t>(rb));
  for (int64_t r = 0; r < rows; ++r) {
    extract_row16(DType::Q4_K, inter.data() + (r / 16) * gb, n, static_cast<int>(r % 16),
                  back.data());
    ASSERT_TRUE(std::equal(back.begin(), back.end(), plain.begin() + r * rb)) << r;
  }
  std::vector<BlockQ8_K> a(static_cast<size_t>(n / 256));
  quantize_row_q8_K(gaussian(n, 700).data(), a.data(), n);
  const CpuKernels& ref = scalar_kernels();
  for (const CpuKernels* k : supported_kernels())
    for (int64_t g = 0; g < rows / 16; ++g) {
      float out[16];
      k->matvec_q4_Kx16(inter.data() + g * gb, a.data(), n / 256, out);
      for (int r = 0; r < 16; ++r)
        ASSERT_EQ(out[r], ref.dot_kq[kquant_slot(DType::Q4_K)](
                              plain.data() + (g * 16 + r) * rb, a.data(), n))
            << k->name << " row " << g * 16 + r;
    }
  // Several activations at once (prompt batches), one of them constant: its Q8_K quants are all
  // -127, the extreme of the mins' 16-bit pair sums.
  std::vector<std::vector<BlockQ8_K>> xs(kGroupTokens, std::vector<BlockQ8_K>(n / 256));
  for (int t = 0; t < kGroupTokens; ++t) {
    const std::vector<float> v = t == 3 ? std::vector<float>(n, 2.5f) : gaussian(n, 710 + t);
    quantize_row_q8_K(v.data(), xs[t].data(), n);
  }
  ASSERT_EQ(xs[3][0].qs[0], -127);
  for (const CpuKernels* k : supported_kernels())
    for (int n_x = 1; n_x <= kGroupTokens; ++n_x)
      for (int64_t g = 0; g < rows / 16; ++g) {
        float out[kGroupTokens][16];
        const BlockQ8_K* in[kGroupTokens];
        float* outs[kGroupTokens];
        for (int t = 0; t < n_x; ++t) in[t] = xs[t].data(), outs[t] = out[t];
        k->matmat_q4_Kx16(inter.data() + g * gb, in, n_x, n / 256, outs);
        for (int t = 0; t < n_x; ++t)
          for (int r = 0; r < 16; ++r)
            ASSERT_EQ(out[t][r], ref.dot_kq[kquant_slot(DType::Q4_K)](
                                     plain.data() + (g * 16 + r) * rb, xs[t].data(), n))
                << k->name << " tokens " << n_x << " token " << t << " row " << g * 16 + r;
      }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Q6_K rows in blocks of 16 times a batch (prompts): the VNNI kernel repacks the block and
// multiplies 16 rows per instruction; every variant equals the scalar dot of each row bit for
// bit, for every batch size up to the 64 a product takes, and rows further apart than their bytes.
TEST(KQuantKernels, Q6KBlocksOf16RowsTimesABatchEqualTheScalarDotBitForBit) {
  const int64_t n = 1024, nb = n / 256, rb = static_cast<int64_t>(row_bytes(DType::Q6_K, n));
  const int64_t stride = rb + 64;  // a row view's rows may be further apart than their bytes
  std::vector<uint8_t> rows(static_cast<size_t>(16 * stride), 0xee);
  for (int r = 0; r < 16; ++r) {
    std::vector<float> v = gaussian(n, 800 + r);
    if (r == 5)
      for (size_t i = 0; i < v.size(); ++i) v[i] *= (i % 16 == 0) ? 50.0f : 1.0f;  // outliers
    const std::vector<uint8_t> q = quantized(DType::Q6_K, v);
    std::copy(q.begin(), q.end(), rows.begin() + r * stride);
  }
  constexpr int kMaxTokens = 64;
  std::vector<std::vector<BlockQ8_K>> xs(kMaxTokens, std::vector<BlockQ8_K>(nb));
  for (int t = 0; t < kMaxTokens; ++t) {
    const std::vector<float> v = t == 2 ? std::vector<float>(n, -1.5f) : gaussian(n, 900 + t);
    quantize_row_q8_K(v.data(), xs[t].data(), n);
  }
  const CpuKernels& ref = scalar_kernels();
  const auto slot = kquant_slot(DType::Q6_K);
  for (const CpuKernels* k : supported_kernels())
    for (int n_x : {1, 2, 3, 4, 5, 7, 8, 13, 64}) {
      std::vector<float> out(static_cast<size_t>(n_x * 16), -1.0f);
      const BlockQ8_K* in[kMaxTokens];
      float* outs[kMaxTokens];
      for (int t = 0; t < n_x; ++t) in[t] = xs[t].data(), outs[t] = out.data() + t * 16;
      k->matmat_q6_K_rows16(rows.data(), static_cast<uint64_t>(stride), in, n_x, nb, outs);
      for (int t = 0; t < n_x; ++t)
        for (int r = 0; r < 16; ++r)
          ASSERT_EQ(out[t * 16 + r], ref.dot_kq[slot](rows.data() + r * stride, xs[t].data(), n))
              << k->name << " tokens " << n_x << " token " << t << " row " << r;
    }
}

}  // namespace
}  // namespace strata
