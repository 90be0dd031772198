// The FFN variants of LLaMA-family models, as the ops that compute them see them.
#pragma once

namespace strata {

//   swiglu: h = silu(gate) * up            (LLaMA, Mistral)
//   reglu:  h = relu(gate) * up            (ReluLLaMA, ProSparse)
//   drelu:  h = relu(gate) * relu(up)      (TurboSparse, Bamboo)
//   relu:   h = relu(up), no gate          (OPT, Falcon-ReLU)
enum class FfnActivation { SwiGLU, ReGLU, DReLU, ReLU };

inline bool ffn_has_gate(FfnActivation a) {
  return a != FfnActivation::ReLU;
}

}  // namespace strata
