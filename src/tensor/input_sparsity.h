// Training-free activation sparsity (TEAL, arXiv 2408.14690; CATS, arXiv 2404.08763), per
// element, as every backend computes it: one function that the CPU backend and the CUDA kernels
// both call.
//   TEAL: an input value of a product whose magnitude is at most the tensor's threshold becomes
//         0, so the product reads only the weight columns of the values left;
//   CATS: a gate value whose activation (silu, gelu) has magnitude at most the threshold becomes
//         0, so the FFN's hidden value is 0 and its up row and down column are not needed.
// A threshold of 0 changes nothing (|x| <= 0 only for zeros), so sparsity 0 is the dense model.
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "tensor/ffn_activation.h"

namespace strata {

STRATA_HD inline float teal_keep(float x, float threshold) {
  return fabsf(x) > threshold ? x : 0.0f;
}

// The gate's own activation, the value CATS thresholds (the plain FFNs have no gate: identity).
STRATA_HD inline float gate_activation(FfnActivation act, float g) {
  switch (act) {
    case FfnActivation::SwiGLU:
      return g / (1.0f + expf(-g));
    case FfnActivation::ReGLU:
    case FfnActivation::DReLU:
      return g > 0.0f ? g : 0.0f;
    case FfnActivation::GeGLU:
      return gelu_tanh(g);
    case FfnActivation::SwiGLUOai:
      return oai_gate(g);
    case FfnActivation::ReLU:
    case FfnActivation::GELU:
      return g;
  }
  return g;
}

STRATA_HD inline float cats_keep(FfnActivation act, float g, float threshold) {
  return fabsf(gate_activation(act, g)) > threshold ? g : 0.0f;
}

}  // namespace strata
