// A mixture-of-experts layer's output for one value: the token's chosen experts' outputs
// weighted by the router and summed in the order of the choice, with fused multiply-adds, in one
// function that the CPU backend, the CUDA kernel and the scalar reference all call, so every
// backend gives the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace strata {

// sum over s < k of weights[s] * y[s * stride], from 0.
STRATA_HD inline float mix_value(const float* y, const float* weights, int64_t k, int64_t stride) {
  float sum = 0.0f;
  for (int64_t s = 0; s < k; ++s) sum = fmaf(weights[s], y[s * stride], sum);
  return sum;
}

// A mixture seen as one FFN of n_expert * expert_ff neurons (neuron i is neuron i % expert_ff of
// expert i / expert_ff): the weight token b's routing gives neuron i, from its dense expert
// weights (weights[e]: 0 for an expert it did not choose).
STRATA_HD inline float neuron_expert_weight(const float* weights, int64_t neuron,
                                            int64_t expert_ff) {
  return weights[neuron / expert_ff];
}

}  // namespace strata
