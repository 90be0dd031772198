// The ceiling for prompt speed, beside bandwidth.h's for decode: a prompt multiplies every
// weight by many tokens, so it is bound by how many multiply-adds the cores issue, not by how
// fast the weights stream. `strata bench` measures the machine's multiply-add rates with the
// instructions the kernels use and reports prompt speed as a share of the limit they set.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"
#include "model/config.h"

namespace strata {

struct ComputeRate {
  double macs_per_s = 0;  // 0: not measured (the instruction is missing)
  std::string instruction;
};

struct ComputePeaks {
  ComputeRate int8;      // the int8 products of quantized types (VNNI vpdpbusd, AVX2 maddubs)
  ComputeRate f32;       // the float products of F32/F16/BF16 weights (FMA)
  ComputeRate amx_int8;  // AMX tiles (Q8_0/Q4_0 prompt batches where the CPU has them)
  // AMX-BF16 tiles (F16 prompt batches where the CPU has them): their rate over three, the tile
  // products one F16 multiply-add takes there (amx_matmat.h).
  ComputeRate amx_f16;
};

// All of the pool's threads run each kernel's peak loop at once; best of `passes` passes of
// about `seconds` each.
ComputePeaks measure_compute_peaks(ThreadPool& pool, const CpuKernels& kernels,
                                   double seconds = 0.02, int passes = 3);

// Multiply-adds one token of an n_prompt-token prompt costs: every layer matrix it multiplies
// (a mixture's n_expert_used experts and its shared expert), and attention's scores and value
// sums over the positions before it, averaged over the prompt. The output head is left out
// (a prompt computes the logits of its last token only).
double prompt_macs_per_token(const ModelConfig& config, int64_t n_prompt);

// The rate that bounds prompts of `weights`: AMX for the types its tiles take when it is
// there, the int8 products for other quantized types, FMA for float ones.
const ComputeRate& prompt_compute_rate(const ComputePeaks& peaks, DType weights);

}  // namespace strata
