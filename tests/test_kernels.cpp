// Every SIMD kernel against the scalar reference, and the threaded matvec against a serial one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A quantized matrix plus the f32 values it represents.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

TestMatrix make_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m;
  const auto values = random_values(rows * cols, seed);
  const uint64_t rb = row_bytes(type, cols);
  m.bytes.resize(rb * rows);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(type, values.data() + r * cols, m.bytes.data() + r * rb, cols);
  m.view = {type, m.bytes.data(), cols, rows, rb};
  return m;
}

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

TEST(Kernels, EverySimdVariantMatchesScalarForEveryType) {
  const auto variants = supported_kernels();
  if (variants.size() == 1) GTEST_SKIP() << "CPU without SIMD variants";
  const CpuKernels& ref = scalar_kernels();
  for (size_t v = 1; v < variants.size(); ++v) {
    const CpuKernels* fast = variants[v];
    for (DType type : kTypes) {
      for (int64_t cols : {32, 64, 96, 160, 2048, 4160, 4192}) {
        const auto m = make_matrix(type, 8, cols, 11 + cols);
        const auto x = random_values(cols, 5);
        PreparedInput in_ref, in_fast;
        in_ref.prepare(ref, x.data(), cols, needs_q8_input(type));
        in_fast.prepare(*fast, x.data(), cols, needs_q8_input(type));
        for (int64_t r = 0; r < 8; ++r) {
          const float a = dot_row(ref, m.view, r, in_ref);
          const float b = dot_row(*fast, m.view, r, in_fast);
          // Same products, different summation order: error bounded by n * eps * sum |terms|.
          EXPECT_NEAR(a, b, 1e-5f * cols)
              << fast->name << " " << dtype_name(type) << " cols=" << cols;
        }
      }
    }
  }
}

TEST(Kernels, GatheredRowsEqualDenseRowsWithOrWithoutANextRow) {
  // The gather kernels request the caller's next row while they work; the values must be the
  // dense kernels' exactly, for every type and variant (odd lengths included).
  for (const CpuKernels* k : supported_kernels())
    for (DType type : kTypes)
      for (int64_t cols : {32, 96, 160, 2048, 4192}) {
        const auto m = make_matrix(type, 3, cols, 17 + cols);
        const auto x = random_values(cols, 4);
        PreparedInput in;
        in.prepare(*k, x.data(), cols, needs_q8_input(type));
        for (int64_t r = 0; r < 3; ++r) {
          const float dense = dot_row(*k, m.view, r, in);
          ASSERT_EQ(dot_row_gathered(*k, m.view, r, in), dense) << k->name << dtype_name(type);
          ASSERT_EQ(dot_row_gathered(*k, m.view, r, in, m.view.row((r + 1) % 3)), dense)
              << k->name << " " << dtype_name(type) << " cols " << cols;
        }
      }
}

TEST(Kernels, FourRowQ4GatherEqualsOneRowGatherBitForBit) {
  // The sparse gather computes Q4_0 rows four at a time and must give exactly the single-row
  // kernel's values (and so the dense product's). Odd and even block counts, 1 to 131 blocks.
  for (const CpuKernels* k : supported_kernels())
    for (int64_t cols : {32, 64, 96, 128, 160, 4192}) {
      const auto m = make_matrix(DType::Q4_0, 6, cols, 3 + cols);
      const auto x = random_values(cols, 8);
      PreparedInput in;
      in.prepare(*k, x.data(), cols, true);
      const BlockQ4_0* rows[4];
      const int64_t picks[4] = {5, 0, 3, 2};
      for (int r = 0; r < 4; ++r)
        rows[r] = reinterpret_cast<const BlockQ4_0*>(m.view.row(picks[r]));
      float out[4], again[4];
      k->gather_dot4_q4_0(rows, in.q8(), cols, out, nullptr, 0);
      // Requesting next rows changes nothing but the caches.
      const void* next[2] = {m.view.row(1), m.view.row(4)};
      k->gather_dot4_q4_0(rows, in.q8(), cols, again, next, 2);
      for (int r = 0; r < 4; ++r) {
        ASSERT_EQ(out[r], k->gather_dot_q4_0(rows[r], in.q8(), cols, nullptr))
            << k->name << " " << cols;
        ASSERT_EQ(out[r], again[r]) << k->name << " " << cols;
        ASSERT_EQ(out[r], dot_row(*k, m.view, picks[r], in)) << k->name << " " << cols;
      }
    }
}

// Prompt-batch tiles (rows x vectors in registers) against the scalar dot products, for every
// remainder of rows and vectors and columns that are not a multiple of the vector width.
TEST(Kernels, FloatTilesMatchScalarDots) {
  for (const CpuKernels* k : supported_kernels())
    for (DType type : {DType::F32, DType::F16, DType::BF16})
      for (int64_t cols : {8, 40, 256, 1000, 1500}) {
        // (row, vector) -> its sum from the first tile shape: every shape gives the same bits
        // (the sums of long rows go in chunks; a lane's order does not depend on the tile).
        std::map<std::pair<int, int>, float> first;
        const int rows = 11, n_x = 13;
        const auto m = make_matrix(type, rows, cols, 50 + cols);
        std::vector<std::vector<float>> xs;
        std::vector<const float*> ptrs;
        for (int t = 0; t < n_x; ++t) xs.push_back(random_values(cols, 60 + t));
        for (const auto& x : xs) ptrs.push_back(x.data());
        for (int n_rows : {1, 4, 5, 11})
          for (int n : {1, 3, 6, 7, 13}) {
            std::vector<float> out(n_rows * n, -1.0f);
            const int64_t stride =
                static_cast<int64_t>(m.view.row_bytes) / (type == DType::F32 ? 4 : 2);
            if (type == DType::F32)
              k->dot_f32_tile(reinterpret_cast<const float*>(m.view.data), stride, n_rows,
                              ptrs.data(), n, cols, out.data());
            else if (type == DType::F16)
              k->dot_f16_tile(reinterpret_cast<const uint16_t*>(m.view.data), stride, n_rows,
                              ptrs.data(), n, cols, out.data());
            else
              k->dot_bf16_tile(reinterpret_cast<const uint16_t*>(m.view.data), stride, n_rows,
                               ptrs.data(), n, cols, out.data());
            for (int r = 0; r < n_rows; ++r)
              for (int t = 0; t < n; ++t) {
                PreparedInput in;
                in.prepare(scalar_kernels(), xs[t].data(), cols, false);
                ASSERT_NEAR(out[r * n + t], dot_row(scalar_kernels(), m.view, r, in), 1e-5f * cols)
                    << k->name << " " << dtype_name(type) << " cols " << cols << " rows " << n_rows
                    << " vectors " << n << " at " << r << "," << t;
                const auto [it, added] = first.try_emplace({r, t}, out[r * n + t]);
                ASSERT_EQ(out[r * n + t], it->second)
                    << k->name << " " << dtype_name(type) << " cols " << cols << " rows " << n_rows
                    << " vectors " << n << " at " << r << "," << t;
              }
          }
      }
}

TEST(Kernels, AmxProductsEqualScalarKernelBitForBit) {
  if (!amx_available()) GTEST_SKIP() << "CPU without AMX";
  // 40 rows (two full tiles and a partial one), 1..32 tokens, columns of several blocks.
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const TestMatrix m = make_matrix(type, 40, 256, 12);
    for (int n_tokens : {1, 5, 16, 17, 32}) {
      std::vector<PreparedInput> in(n_tokens);
      std::vector<std::vector<float>> xs;
      std::vector<Q8Activation> q8;
      for (int t = 0; t < n_tokens; ++t) xs.push_back(random_values(256, 100 + t));
      for (int t = 0; t < n_tokens; ++t) {
        in[t].prepare(scalar_kernels(), xs[t].data(), 256, true);
        q8.push_back(in[t].q8());
      }
      std::vector<float> y(n_tokens * 40, -1.0f);
      // bench's peak loop loads its own tile configuration: the products must load theirs again.
      if (n_tokens == 17) amx_int8_peak_loop(2);
      amx_matmat_rows(m.view, 0, 40, q8, y.data(), 40);
      for (int t = 0; t < n_tokens; ++t)
        for (int r = 0; r < 40; ++r)
          ASSERT_EQ(y[t * 40 + r], dot_row(scalar_kernels(), m.view, r, in[t]))
              << dtype_name(type) << " token " << t << " row " << r;
    }
  }
}

// F16 weights on AMX-BF16 tiles: every product within F32 rounding of the exact one (the split
// drops under 2^-24 of each product), for partial tiles of rows, tokens and columns, with the
// int8 products' tiles loaded in between.
TEST(Kernels, AmxBf16ProductsOfF16WeightsAreWithinTheSplitsBound) {
  if (!amx_bf16_available()) GTEST_SKIP() << "CPU without AMX-BF16";
  const int64_t rows = 40, cols = 200;
  const TestMatrix m = make_matrix(DType::F16, rows, cols, 13);
  const TestMatrix q8 = make_matrix(DType::Q8_0, 16, 256, 14);
  for (int n_tokens : {1, 5, 16, 17, 33, 64}) {
    std::vector<std::vector<float>> xs;
    std::vector<const float*> ptrs;
    for (int t = 0; t < n_tokens; ++t) xs.push_back(random_values(cols, 200 + t));
    for (const auto& x : xs) ptrs.push_back(x.data());
    AmxBf16Activations split;
    split.prepare(ptrs, cols);
    if (n_tokens == 17) {  // another kernel's tiles in between
      PreparedInput in;
      const std::vector<float> x = random_values(256, 1);
      in.prepare(scalar_kernels(), x.data(), 256, true);
      std::vector<float> y(16);
      amx_matmat_rows(q8.view, 0, 16, std::span(&in.q8(), 1), y.data(), 16);
    }
    std::vector<float> y(n_tokens * rows, -7.0f);
    amx_matmat_f16(m.view, 3, rows, split, y.data(), rows);
    for (int t = 0; t < n_tokens; ++t) {
      ASSERT_EQ(y[t * rows + 2], -7.0f) << "a row outside the range was written";
      for (int64_t r = 3; r < rows; ++r) {
        const auto* w = reinterpret_cast<const uint16_t*>(m.view.row(r));
        double exact = 0, magnitude = 0;
        for (int64_t k = 0; k < cols; ++k) {
          exact += double{f16_to_f32(w[k])} * xs[t][k];
          magnitude += std::fabs(double{f16_to_f32(w[k])} * xs[t][k]);
        }
        ASSERT_NEAR(y[t * rows + r], exact, 1e-6 * magnitude)
            << "token " << t << " of " << n_tokens << " row " << r;
      }
    }
  }
}

// The Q4_0/Q8_0 matrix of `m` interleaved by 16 rows (a copy).
TestMatrix interleaved(const TestMatrix& m) {
  TestMatrix i = m;
  interleave_rows16(m.view.type, i.bytes.data(), m.view.rows, m.view.cols);
  i.view.data = i.bytes.data();
  i.view.layout = Layout::Interleaved16;
  return i;
}

const DType kInterleavedTypes[] = {DType::Q4_0, DType::Q8_0};

TEST(Kernels, InterleavedRowsRoundTrip) {
  for (DType type : kInterleavedTypes) {
    const TestMatrix m = make_matrix(type, 32, 96, 7);
    const TestMatrix i = interleaved(m);
    EXPECT_NE(m.bytes, i.bytes);
    std::vector<uint8_t> row(m.view.row_bytes);
    for (int r = 0; r < 32; ++r) {
      extract_row16(type, i.view.data + (r / 16) * interleaved_group_bytes(type, 96), 96, r % 16,
                    row.data());
      EXPECT_EQ(std::memcmp(row.data(), m.view.row(r), m.view.row_bytes), 0)
          << dtype_name(type) << " row " << r;
    }
  }
}

// Every variant's group kernels sum like the scalar dot_q4_0 / dot_q8_0: equal bit for bit.
TEST(Kernels, InterleavedRowsEqualScalarDotBitForBit) {
  for (DType type : kInterleavedTypes)
    for (const CpuKernels* k : supported_kernels())
      for (int64_t cols : {32, 64, 160, 2048, 4160}) {
        const TestMatrix m = make_matrix(type, 48, cols, 30 + cols);
        const TestMatrix i = interleaved(m);
        const auto x = random_values(cols, 31);
        PreparedInput in;
        in.prepare(*k, x.data(), cols, true);
        std::vector<float> y(48);
        matvec_rows(*k, i.view, in, y.data(), 0, 48);
        for (int r = 0; r < 48; ++r) {
          ASSERT_EQ(y[r], dot_row(scalar_kernels(), m.view, r, in))
              << dtype_name(type) << " " << k->name << " cols=" << cols << " row " << r;
          // A single row of the interleaved matrix (the slow path) agrees too.
          ASSERT_EQ(dot_row(*k, i.view, r, in), y[r]) << k->name << " row " << r;
        }
      }
}

// The multi-token group kernels of every variant equal their one-token kernels per token.
TEST(Kernels, InterleavedGroupOfSeveralTokensEqualsOneAtATimeBitForBit) {
  for (DType type : kInterleavedTypes)
    for (const CpuKernels* k : supported_kernels())
      for (int64_t cols : {32, 160, 2048}) {
        const TestMatrix i = interleaved(make_matrix(type, 16, cols, 50 + cols));
        const auto several = type == DType::Q8_0 ? k->matmat_q8_0x16 : k->matmat_q4_0x16;
        const auto one_kernel = type == DType::Q8_0 ? k->matvec_q8_0x16 : k->matvec_q4_0x16;
        std::vector<PreparedInput> in(kGroupTokens);
        std::vector<Q8Activation> xs;
        for (int t = 0; t < kGroupTokens; ++t) {
          const auto x = random_values(cols, 60 + t);
          in[t].prepare(*k, x.data(), cols, true);
          xs.push_back(in[t].q8());
        }
        for (int n = 1; n <= kGroupTokens; ++n) {
          std::vector<float> y(static_cast<size_t>(n * 16), -1.0f), one(16);
          std::vector<float*> out;
          for (int t = 0; t < n; ++t) out.push_back(y.data() + t * 16);
          several(i.view.data, xs.data(), n, cols / 32, out.data());
          for (int t = 0; t < n; ++t) {
            one_kernel(i.view.data, xs[t], cols / 32, one.data());
            for (int r = 0; r < 16; ++r)
              ASSERT_EQ(y[t * 16 + r], one[r])
                  << dtype_name(type) << " " << k->name << " " << n << " tokens, token " << t;
          }
        }
      }
}

// Batched products of an interleaved matrix (AMX tiles where the CPU has them, else the group
// kernel per token), over every thread count and row split, equal the scalar reference.
TEST(MatVec, InterleavedBatchesEqualScalarBitForBit) {
  for (DType type : kInterleavedTypes) {
    const TestMatrix m = make_matrix(type, 80, 256, 40);
    const TestMatrix i = interleaved(m);
    const TestMatrix other = make_matrix(type, 24, 256, 41);  // a second, plain job
    for (int n_tokens : {1, 3, 4, 16, 17, 32}) {
      std::vector<std::vector<float>> xs;
      std::vector<PreparedInput> in(n_tokens);
      for (int t = 0; t < n_tokens; ++t) xs.push_back(random_values(256, 200 + t));
      for (int t = 0; t < n_tokens; ++t) in[t].prepare(best_kernels(), xs[t].data(), 256, true);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        // First: groups aligned with the row tasks (AMX); second: misaligned (group kernel).
        for (bool first : {true, false}) {
          std::vector<float> y(n_tokens * 80, -1.0f), z(n_tokens * 24, -1.0f);
          if (first)
            matmat_multi(best_kernels(), {{&i.view, y.data(), 80}, {&other.view, z.data(), 24}}, in,
                         pool);
          else
            matmat_multi(best_kernels(), {{&other.view, z.data(), 24}, {&i.view, y.data(), 80}}, in,
                         pool);
          for (int t = 0; t < n_tokens; ++t)
            for (int r = 0; r < 80; ++r)
              ASSERT_EQ(y[t * 80 + r], dot_row(scalar_kernels(), m.view, r, in[t]))
                  << dtype_name(type) << " " << n_tokens << " tokens, " << threads
                  << " threads, token " << t << " row " << r
                  << (first ? " (aligned)" : " (misaligned)");
        }
      }
    }
  }
}

TEST(Kernels, Avx2QuantizerMatchesScalarBitForBit) {
  const CpuKernels* fast = avx2_kernels();
  if (fast == nullptr) GTEST_SKIP() << "CPU without AVX2";
  auto x = random_values(32 * 64, 3);
  // Values that land exactly on .5 after scaling exercise the rounding rule.
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.5f;
  x[31] = 127.0f * 0.5f;
  std::vector<BlockQ8_0> a(64), b(64);
  scalar_kernels().quantize_q8_0(x.data(), a.data(), x.size());
  fast->quantize_q8_0(x.data(), b.data(), x.size());
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(a[i].d, b[i].d) << i;
    for (int j = 0; j < 32; ++j) EXPECT_EQ(a[i].qs[j], b[i].qs[j]) << i << "," << j;
  }
}

TEST(Kernels, QuantizedDotMatchesDequantizedProduct) {
  // The Q8_0 activation path against plain f32 arithmetic on the dequantized weights.
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const int64_t cols = 1024;
    const auto m = make_matrix(type, 4, cols, 21);
    const auto x = random_values(cols, 22);
    PreparedInput in;
    in.prepare(best_kernels(), x.data(), cols, true);
    std::vector<float> w(cols);
    for (int64_t r = 0; r < 4; ++r) {
      dequantize_row(type, m.view.row(r), w.data(), cols);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < cols; ++i) {
        exact += double(w[i]) * x[i];
        mag += std::fabs(double(w[i]) * x[i]);
      }
      // Error comes from quantizing x to 8 bits: about 1/127 of the magnitude sum / sqrt(n).
      EXPECT_NEAR(dot_row(best_kernels(), m.view, r, in), exact, 0.01 * mag) << dtype_name(type);
    }
  }
}

TEST(MatVec, ResultsIdenticalForAnyThreadCount) {
  for (DType type : kTypes) {
    const auto m = make_matrix(type, 333, 256, 99);
    const auto x = random_values(256, 98);
    std::vector<float> y1(333), y2(333), y3(333);
    ThreadPool p1(1), p2(2), p3(3);
    matvec(best_kernels(), m.view, x.data(), y1.data(), p1);
    matvec(best_kernels(), m.view, x.data(), y2.data(), p2);
    matvec(best_kernels(), m.view, x.data(), y3.data(), p3);
    EXPECT_EQ(y1, y2) << dtype_name(type);
    EXPECT_EQ(y1, y3) << dtype_name(type);
    // And each row equals the single-row kernel.
    PreparedInput in;
    in.prepare(best_kernels(), x.data(), 256, needs_q8_input(type));
    for (int64_t r = 0; r < 333; r += 37) EXPECT_EQ(y1[r], dot_row(best_kernels(), m.view, r, in));
  }
}

// Issue 52: a thread held up (preempted by the OS, here: waiting) costs the chunk it holds, not
// a fixed share: the other threads take every other chunk meanwhile. (With fixed shares the
// held thread's share waits for it: the wait below would run out and the test fail.)
TEST(ThreadPool, AHeldUpThreadsChunksAreTakenByTheOthers) {
  ThreadPool pool(3);
  const int64_t n = 120;
  std::atomic<int64_t> done{0};
  std::atomic<bool> saw_all{false};
  pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    if (b == 0) {  // the first chunk waits for every other one
      for (int i = 0; i < 30000 && done.load() < n - e; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      saw_all = done.load() == n - e;
    }
    done += e - b;
  });
  EXPECT_TRUE(saw_all.load());
  EXPECT_EQ(done.load(), n);
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 1000}) {
    std::vector<int> hits(n, 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace strata
