// One token's sparse FFN in a single pass over its neurons (decode): for each neuron of the
// list, its gate and up products, the activation, and at once its ffn_down_t row scaled by the
// result. gather_matmat + axpy_rows do the same in two passes with a barrier between; here a
// neuron's three rows are read back to back (in a bundled layout, one contiguous read), each
// step requesting the next step's rows while it works, and the down rows of neurons whose
// activation is zero are never read.
//
// Arithmetic: every product is the same gather kernel call as gather_matmat's, and the down
// projection sums the same buckets of kAxpyBucket neuron ids in the same order as axpy_rows, so
// the output equals gather_matmat + activation + axpy_rows for that token bit for bit, for any
// thread count.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matvec.h"
#include "tensor/matrix.h"

namespace strata {

struct FusedFfnWeights {
  const MatrixView* gate = nullptr;  // null: an ungated FFN (h = act(up))
  const MatrixView* up = nullptr;
  const MatrixView* down_t = nullptr;  // one row of n_embd per neuron
};

// h[0, count) from the gate and up products of `count` neurons (gate null when ungated).
using FfnActivationFn = void (*)(const void* ctx, const float* gate, const float* up, float* h,
                                 int64_t count);

struct FusedFfnActivation {
  FfnActivationFn fn = nullptr;
  const void* ctx = nullptr;
  // h == 0 whenever the gate product is <= 0 (ReGLU, DReLU): while up is computed, only those
  // neurons' down rows are requested. Otherwise (SwiGLU, ungated) every neuron's are.
  bool gate_decides = false;
};

// out[0, down_t.cols) = sum over k of h[k] * down_t.row(ids[k]), where h[k] (written) is the
// activation of row ids[k]. Returns how many h[k] are non-zero. `neurons`: the neuron id of
// each row when `ids` are not neuron ids (neuron cache slots), as for axpy_rows.
uint64_t fused_ffn_token(const CpuKernels& kernels, const FusedFfnWeights& w,
                         std::span<const int32_t> ids, const PreparedInput& x,
                         const FusedFfnActivation& act, float* h, float* out, ThreadPool& pool,
                         std::span<const int32_t> neurons = {});

}  // namespace strata
