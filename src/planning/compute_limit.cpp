#include "planning/compute_limit.h"

#include <algorithm>

#include "backends/cpu/amx_matmat.h"
#include "backends/cpu/matvec.h"
#include "core/timer.h"
#include "model/weights.h"

namespace strata {
namespace {

// Multiply-adds per second of `loop` on every thread at once: iterations sized on one thread
// to last about `seconds`, then the best of `passes` runs of all threads.
template <class Loop>
double peak_rate(ThreadPool& pool, Loop loop, double seconds, int passes) {
  int64_t iterations = 1024;
  for (;;) {  // size the loop: double it until one run takes a tenth of the target
    Timer t;
    loop(iterations);
    const double s = t.seconds();
    if (s >= seconds / 10 || iterations >= (int64_t{1} << 40)) {
      iterations = std::max<int64_t>(1, static_cast<int64_t>(iterations * seconds / s));
      break;
    }
    iterations *= 2;
  }
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    std::vector<uint64_t> macs(static_cast<size_t>(pool.size()) * 8, 0);  // a line apart
    Timer t;
    pool.run_on_all([&](int thread) { macs[static_cast<size_t>(thread) * 8] = loop(iterations); });
    const double s = t.seconds();
    uint64_t total = 0;
    for (uint64_t m : macs) total += m;
    best = std::max(best, static_cast<double>(total) / s);
  }
  return best;
}

}  // namespace

ComputePeaks measure_compute_peaks(ThreadPool& pool, const CpuKernels& k, double seconds,
                                   int passes) {
  ComputePeaks p;
  const std::string name = k.name;
  p.int8 = {peak_rate(pool, k.int8_peak_loop, seconds, passes),
            name == "avx512vnni" ? "vpdpbusd zmm"
            : name == "avx2"     ? "vpmaddubsw+vpmaddwd ymm"
                                 : "scalar int32"};
  p.f32 = {peak_rate(pool, k.f32_peak_loop, seconds, passes), name == "avx512vnni" ? "vfmadd zmm"
                                                              : name == "avx2"     ? "vfmadd ymm"
                                                                               : "scalar float"};
  if (amx_available())
    p.amx_int8 = {peak_rate(pool, amx_int8_peak_loop, seconds, passes), "AMX tdpbssd"};
  if (amx_bf16_available())
    p.amx_f16 = {peak_rate(pool, amx_bf16_peak_loop, seconds, passes) / 3,
                 "AMX tdpbf16ps, 3 per F16 multiply-add"};
  return p;
}

double prompt_macs_per_token(const ModelConfig& c, int64_t n_prompt) {
  const auto macs = [&](LayerMatrix role) {
    const auto [cols, rows] = layer_matrix_shape(role, c);
    return static_cast<double>(cols) * static_cast<double>(rows);
  };
  const double attention = macs(LayerMatrix::AttnQ) + macs(LayerMatrix::AttnK) +
                           macs(LayerMatrix::AttnV) + macs(LayerMatrix::AttnOutput);
  const double one_ffn = macs(LayerMatrix::FfnUp) + macs(LayerMatrix::FfnDown) +
                         (ffn_has_gate(c.ffn) ? macs(LayerMatrix::FfnGate) : 0.0);
  double ffn = one_ffn * static_cast<double>(std::max<int64_t>(1, c.n_expert_used));
  if (c.n_ff_shared > 0)
    ffn += static_cast<double>(c.n_ff_shared) * static_cast<double>(c.n_embd) *
           (ffn_has_gate(c.ffn) ? 3.0 : 2.0);
  // Token i (from 0) attends to i + 1 positions: scores and value sums, head_dim each per head.
  const double positions = (static_cast<double>(n_prompt) + 1) / 2;
  const double scores = 2.0 * static_cast<double>(c.n_head * c.head_dim) * positions;
  return static_cast<double>(c.n_layer) * (attention + ffn + scores);
}

const ComputeRate& prompt_compute_rate(const ComputePeaks& p, DType weights) {
  if (weights == DType::F16 && p.amx_f16.macs_per_s > 0) return p.amx_f16;
  if (is_float_type(weights)) return p.f32;
  if (amx_reads(weights) && p.amx_int8.macs_per_s > 0) return p.amx_int8;
  return p.int8;
}

}  // namespace strata
