// The CPU's flash-style attention: its exponential against exp, every kernel variant against
// the scalar reference bit for bit, and attend_rows against attention in double precision, with
// a row's bits the same alone as in any run of rows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/attention.h"
#include "tensor/quantize.h"
#include "backends/cpu/attention_exp.h"
#include "backends/cpu/kernels.h"
#include "tensor/half.h"

namespace strata {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(CpuAttention, ExpIsWithinTwoUlpOfExpOverTheSoftmaxRange) {
  EXPECT_EQ(attention_exp(0.0f), 1.0f);
  EXPECT_EQ(attention_exp(-0.0f), 1.0f);
  EXPECT_EQ(attention_exp(-INFINITY), 0.0f);
  EXPECT_EQ(attention_exp(-87.5f), 0.0f);
  EXPECT_EQ(attention_exp(NAN), 0.0f);
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.000731f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(attention_exp(x) - want) / want);
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of a float is 2.4e-7 at worst
}

// Rows over one panel: `lo`/`hi` cover a full panel, a single position, an empty prefix and
// suffix; states fresh (max -inf) and continuing.
struct PanelCase {
  std::vector<float> q, out, state;  // state: per row, max then the partial sums
  std::vector<AttentionRow> rows;
};

PanelCase make_rows(int n_rows, int64_t hd, bool fresh, uint32_t seed) {
  PanelCase c;
  c.q = random_values(n_rows * hd, seed);
  c.out = fresh ? std::vector<float>(n_rows * hd, 0.0f) : random_values(n_rows * hd, seed + 1);
  c.state = random_values(n_rows * (1 + kAttentionSumLanes), seed + 2);
  const int ranges[][2] = {{0, 64}, {5, 6}, {3, 64}, {0, 40}, {17, 49}};
  for (int r = 0; r < n_rows; ++r) {
    float* s = &c.state[static_cast<size_t>(r * (1 + kAttentionSumLanes))];
    if (fresh) {
      s[0] = -INFINITY;
      std::fill(s + 1, s + 1 + kAttentionSumLanes, 0.0f);
    } else {
      for (int j = 1; j <= kAttentionSumLanes; ++j) s[j] = std::fabs(s[j]);
    }
    c.rows.push_back({&c.q[static_cast<size_t>(r * hd)], &c.out[static_cast<size_t>(r * hd)], s,
                      s + 1, ranges[r % 5][0], ranges[r % 5][1]});
  }
  return c;
}

TEST(CpuAttention, SoftCapIsCapTimesTanh) {
  double worst = 0;
  for (const float cap : {1.5f, 50.0f})
    for (float s = -400.0f; s <= 400.0f; s += 0.0371f) {
      const double want = cap * std::tanh(static_cast<double>(s) / cap);
      worst = std::max(worst, std::fabs(attention_soft_cap(s, cap, 1.0f / cap) - want));
    }
  EXPECT_LT(worst, 2e-5);  // in absolute terms: near 0 tanh's (1 - e) loses relative precision
  EXPECT_EQ(attention_soft_cap(0.0f, 50.0f, 0.02f), 0.0f);
  EXPECT_EQ(attention_soft_cap(1e30f, 50.0f, 0.02f), 50.0f);
  EXPECT_EQ(attention_soft_cap(-1e30f, 50.0f, 0.02f), -50.0f);
}

TEST(CpuAttention, PanelsEqualTheScalarReferenceBitForBit) {
  for (const CpuKernels* k : supported_kernels())
    for (int64_t hd : {64, 72, 80, 128})
      for (int n_rows : {1, 3, 4, 9})
        for (bool fresh : {true, false})
          for (const float softcap : {0.0f, 0.75f}) {
          const int64_t v_stride = hd * 3;
          const std::vector<float> kt = random_values(kAttentionPanel * hd, 7 + n_rows);
          const std::vector<float> v = random_values(kAttentionPanel * v_stride, 11 + hd);
          PanelCase got = make_rows(n_rows, hd, fresh, 20), want = make_rows(n_rows, hd, fresh, 20);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          k->attend_panel(kt.data(), v.data(), v_stride, hd, scale, softcap, got.rows.data(),
                          n_rows);
          scalar_kernels().attend_panel(kt.data(), v.data(), v_stride, hd, scale, softcap,
                                        want.rows.data(), n_rows);
          const std::string what = std::string(k->name) + " hd " + std::to_string(hd) + " rows " +
                                   std::to_string(n_rows) + (fresh ? " fresh" : " continuing") +
                                   " cap " + std::to_string(softcap);
          ASSERT_EQ(got.out, want.out) << what;
          ASSERT_EQ(got.state, want.state) << what;
        }
}

TEST(CpuAttention, PanelLoadsEqualTheScalarReferenceAndTheCache) {
  for (const CpuKernels* k : supported_kernels())
    for (bool f16 : {false, true})
      for (bool transpose : {false, true})
        for (int64_t hd : {64, 72})
          for (int n_pos : {1, 17, 64}) {
            const int64_t stride = hd * 2 + 8;
            const std::vector<float> values = random_values(n_pos * stride, 3);
            std::vector<uint16_t> halves(values.size());
            for (size_t i = 0; i < values.size(); ++i) halves[i] = f32_to_f16(values[i]);
            const void* src = f16 ? static_cast<const void*>(halves.data()) : values.data();
            std::vector<float> got(kAttentionPanel * hd, -1.0f), want = got;
            k->load_panel(src, f16, stride, n_pos, hd, transpose, got.data());
            scalar_kernels().load_panel(src, f16, stride, n_pos, hd, transpose, want.data());
            ASSERT_EQ(got, want) << k->name << " f16 " << f16 << " transposed " << transpose
                                 << " hd " << hd << " positions " << n_pos;
            const int64_t p = n_pos - 1, d = hd - 1;
            const float cached = f16 ? f16_to_f32(halves[p * stride + d]) : values[p * stride + d];
            ASSERT_EQ(want[transpose ? d * kAttentionPanel + p : p * hd + d], cached);
            if (transpose && n_pos < kAttentionPanel) {
              ASSERT_EQ(want[d * kAttentionPanel + n_pos], 0.0f) << "positions past the panel's";
            }
          }
}

// A cache of `rows` positions for one KV head (F32 or F16) and what attention gives in double.
struct Cache {
  int64_t hd, stride;
  std::vector<float> k, v;
  std::vector<uint16_t> k16, v16;
  CachedHead head(bool f16) const {
    if (f16) return {k16.data(), v16.data(), DType::F16, DType::F16, stride};
    return {k.data(), v.data(), DType::F32, DType::F32, stride};
  }
  double value(const std::vector<float>& x, const std::vector<uint16_t>& h, bool f16,
               int64_t i) const {
    return f16 ? f16_to_f32(h[static_cast<size_t>(i)]) : x[static_cast<size_t>(i)];
  }
  std::vector<double> attend(const float* q, int64_t first, int64_t last, bool f16) const {
    std::vector<double> s;
    double top = -INFINITY, total = 0;
    for (int64_t p = first; p <= last; ++p) {
      double dot = 0;
      for (int64_t d = 0; d < hd; ++d) dot += double{q[d]} * value(k, k16, f16, p * stride + d);
      s.push_back(dot / std::sqrt(static_cast<double>(hd)));
      top = std::max(top, s.back());
    }
    for (double& x : s) total += x = std::exp(x - top);
    std::vector<double> out(static_cast<size_t>(hd), 0.0);
    for (int64_t p = first; p <= last; ++p)
      for (int64_t d = 0; d < hd; ++d)
        out[d] += s[p - first] / total * value(v, v16, f16, p * stride + d);
    return out;
  }
};

Cache make_cache(int64_t n_rows, int64_t hd) {
  Cache c{hd, hd * 2, random_values(n_rows * hd * 2, 5, 2.0f), random_values(n_rows * hd * 2, 6),
          {}, {}};
  for (float x : c.k) c.k16.push_back(f32_to_f16(x));
  for (float x : c.v) c.v16.push_back(f32_to_f16(x));
  return c;
}

// Attends `rows` as one run (their outputs in run_out), then each row alone (into alone_out):
// the same bits either way, and each row within 2e-6 of cache.attend over its range.
void expect_run_as_alone_and_near(const CpuKernels& k, const std::vector<QueryRow>& rows, const CachedHead& head,
                                  const Cache& cache, bool f16, int64_t origin, const float* run_out,
                                  float* alone_out, const std::string& what) {
  const int64_t hd = cache.hd;
  attend_rows(k, rows, head, origin, hd, 1.0f / std::sqrt(float(hd)));
  for (const QueryRow& r : rows) {
    QueryRow alone = r;
    alone.out = alone_out + (r.out - run_out);
    attend_rows(k, std::span(&alone, 1), head, origin, hd, 1.0f / std::sqrt(float(hd)));
    const std::vector<double> want = cache.attend(r.q, r.first, r.last, f16);
    for (int64_t d = 0; d < hd; ++d) {
      ASSERT_EQ(alone.out[d], r.out[d]) << k.name << " alone vs in the run";
      ASSERT_NEAR(r.out[d], want[d], 2e-6) << k.name << " " << what;
    }
  }
}

// A run of tokens with causal ranges (and a sliding window of 70) starting off the panel grid:
// each row within 2e-6 of double-precision attention, and each row's bits the same alone.
TEST(CpuAttention, RowsMatchDoublePrecisionAndAreTheSameAloneAsInARun) {
  const int64_t hd = 72, origin = 13, n_tokens = 9, group = 3;
  const Cache cache = make_cache(400, hd);
  for (bool f16 : {false, true})
    for (int64_t window : {0, 70})
      for (const CpuKernels* k : supported_kernels()) {
        const std::vector<float> q = random_values(n_tokens * group * hd, 9);
        std::vector<float> run_out(q.size()), alone_out(q.size());
        std::vector<QueryRow> rows;
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t g = 0; g < group; ++g) {
            const int64_t last = origin + 120 + 31 * t, at = (t * group + g) * hd;
            const int64_t first = window > 0 ? last + 1 - window : origin;
            rows.push_back({&q[at], &run_out[at], first, last});
          }
        expect_run_as_alone_and_near(*k, rows, cache.head(f16), cache, f16, origin, run_out.data(),
                                     alone_out.data(), fmt::format("f16 {} window {}", f16, window));
      }
}

// llama.cpp's -ctk/-ctv q8_0 and q4_0: a cache of blocks reads as its dequantized values (the
// double reference over them), each row the same alone as in a run, keys and values of
// different types.
TEST(CpuAttention, BlockCachesReadAsTheirDequantizedValues) {
  const int64_t hd = 64, origin = 5, n_tokens = 6, group = 2, n_rows = 300;
  Cache plain = make_cache(n_rows, hd);
  for (auto [kt, vt] : {std::pair{DType::Q8_0, DType::Q8_0}, std::pair{DType::Q4_0, DType::Q4_0},
                        std::pair{DType::Q8_0, DType::F16}}) {
    const auto blocks = [&](const std::vector<float>& x, DType t) {
      std::vector<uint8_t> out(row_bytes(t, static_cast<uint64_t>(x.size())));
      quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
      return out;
    };
    const std::vector<uint8_t> kq = blocks(plain.k, kt), vq = blocks(plain.v, vt);
    Cache seen = plain;  // what the blocks hold, for the reference
    dequantize_row(kt, kq.data(), seen.k.data(), static_cast<int64_t>(seen.k.size()));
    dequantize_row(vt, vq.data(), seen.v.data(), static_cast<int64_t>(seen.v.size()));
    const CachedHead head{kq.data(), vq.data(), kt, vt, plain.stride};
    EXPECT_NE(seen.k, plain.k) << "the blocks round";
    for (const CpuKernels* k : supported_kernels()) {
      const std::vector<float> q = random_values(n_tokens * group * hd, 9);
      std::vector<float> run_out(q.size()), alone_out(q.size());
      std::vector<QueryRow> rows;
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t g = 0; g < group; ++g) {
          const int64_t at = (t * group + g) * hd;
          rows.push_back({&q[at], &run_out[at], origin, origin + 100 + 37 * t});
        }
      expect_run_as_alone_and_near(*k, rows, head, seen, false, origin, run_out.data(), alone_out.data(),
                                   fmt::format("{}/{}", dtype_name(kt), dtype_name(vt)));
    }
  }
}

TEST(CpuAttention, RunsAreASequencesConsecutiveTokensUpToTheLimit) {
  const std::vector<int64_t> origin = {0, 0, 0, 0, 0, 64, 64, 0, 64};
  const auto runs = attention_runs(origin.data(), static_cast<int64_t>(origin.size()), 3);
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 3}, {3, 5}, {5, 7}, {7, 8}, {8, 9}};
  ASSERT_EQ(runs.size(), want.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].begin, want[i].first) << i;
    EXPECT_EQ(runs[i].end, want[i].second) << i;
  }
}

}  // namespace
}  // namespace strata
