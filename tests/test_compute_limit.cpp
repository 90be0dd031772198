// The compute limit of `strata bench` (issue 55): the multiply-adds a prompt token costs, the
// rate that bounds each weight type, and the peak loops of every kernel variant.
#include <gtest/gtest.h>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/kernels.h"
#include "planning/compute_limit.h"

namespace strata {
namespace {

TEST(ComputeLimit, PromptMultiplyAddsCountEveryMatrixAndTheAttention) {
  ModelConfig c;
  c.n_embd = 64, c.n_layer = 3, c.n_head = 4, c.n_head_kv = 2, c.head_dim = 16, c.n_ff = 96;
  c.ffn = FfnActivation::SwiGLU;
  // q 64x64, k and v 64x32 each, o 64x64; gate, up, down 64x96 each; scores and value sums of
  // 4 heads x 16 over (8 + 1) / 2 positions on average.
  const double layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 96 + 2 * 4 * 16 * 4.5;
  EXPECT_DOUBLE_EQ(prompt_macs_per_token(c, 8), 3 * layer);
  c.ffn = FfnActivation::ReLU;  // no gate matrix
  EXPECT_DOUBLE_EQ(prompt_macs_per_token(c, 8), 3 * (layer - 64 * 96));
  c.ffn = FfnActivation::SwiGLU;
  c.n_expert = 8, c.n_expert_used = 2, c.n_ff_shared = 32;  // two experts and a shared one
  EXPECT_DOUBLE_EQ(prompt_macs_per_token(c, 8), 3 * (layer + 3 * 64 * 96 + 3 * 64 * 32));
}

TEST(ComputeLimit, EachTypeIsBoundByTheInstructionItsKernelsUse) {
  ComputePeaks p;
  p.int8 = {100, "int8"};
  p.f32 = {50, "fma"};
  EXPECT_EQ(prompt_compute_rate(p, DType::F16).instruction, "fma");
  EXPECT_EQ(prompt_compute_rate(p, DType::BF16).instruction, "fma");
  EXPECT_EQ(prompt_compute_rate(p, DType::Q4_K).instruction, "int8");
  EXPECT_EQ(prompt_compute_rate(p, DType::Q8_0).instruction, "int8");  // no AMX measured
  p.amx_int8 = {800, "amx"};
  EXPECT_EQ(prompt_compute_rate(p, DType::Q8_0).instruction, "amx");
  EXPECT_EQ(prompt_compute_rate(p, DType::Q4_0).instruction, "amx");
  EXPECT_EQ(prompt_compute_rate(p, DType::Q4_K).instruction, "int8");  // its kernels are VNNI's
  p.amx_f16 = {400, "amx bf16"};
  EXPECT_EQ(prompt_compute_rate(p, DType::F16).instruction, "amx bf16");
  EXPECT_EQ(prompt_compute_rate(p, DType::BF16).instruction, "fma");  // no tile kernel for it
}

TEST(ComputeLimit, PeakLoopsCountTheirMultiplyAddsAndEveryVariantIsMeasured) {
  for (const CpuKernels* k : supported_kernels()) {
    const uint64_t int8 = k->int8_peak_loop(10), f32 = k->f32_peak_loop(10);
    EXPECT_GT(int8, 0u) << k->name;
    EXPECT_EQ(k->int8_peak_loop(20), 2 * int8) << k->name;  // linear in the rounds
    EXPECT_EQ(k->f32_peak_loop(20), 2 * f32) << k->name;
    ThreadPool pool(2);
    const ComputePeaks peaks = measure_compute_peaks(pool, *k, 0.002, 1);
    EXPECT_GT(peaks.int8.macs_per_s, 0.0) << k->name;
    EXPECT_GT(peaks.f32.macs_per_s, 0.0) << k->name;
    EXPECT_FALSE(peaks.int8.instruction.empty());
    EXPECT_EQ(peaks.amx_int8.macs_per_s > 0, amx_available());
    EXPECT_EQ(peaks.amx_f16.macs_per_s > 0, amx_bf16_available());
  }
  if (!amx_available()) GTEST_SKIP() << "no AMX: its peak loop is not run";
  EXPECT_EQ(amx_int8_peak_loop(3), 3u * 4 * 16 * 16 * 64);
  if (!amx_bf16_available()) GTEST_SKIP() << "no AMX-BF16: its peak loop is not run";
  EXPECT_EQ(amx_bf16_peak_loop(3), 3u * 4 * 16 * 16 * 32);
}

}  // namespace
}  // namespace strata
