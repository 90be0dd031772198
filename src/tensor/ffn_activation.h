// The FFN variants, as the ops that compute them see them.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace strata {

//   swiglu: h = silu(gate) * up            (LLaMA, Mistral)
//   reglu:  h = relu(gate) * up            (ReluLLaMA, ProSparse)
//   drelu:  h = relu(gate) * relu(up)      (TurboSparse, Bamboo)
//   geglu:  h = gelu(gate) * up            (Gemma; GELU's tanh form, below): never exactly zero
//   relu:   h = relu(up), no gate          (OPT, ReluFalcon)
//   gelu:   h = gelu(up), no gate          (Falcon): llama.cpp's tanh form,
//           0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), computed in f32 (llama.cpp's CPU
//           rounds u to f16 and looks the value up in a table; its CUDA code computes it)
//   swiglu_oai: g' = min(gate, 7), u' = clamp(up, -7, 7), h = g' sigmoid(1.702 g') (u' + 1)
//           (gpt-oss's clamped SwiGLU, llama.cpp's ggml_swiglu_oai)
enum class FfnActivation { SwiGLU, ReGLU, DReLU, GeGLU, ReLU, GELU, SwiGLUOai };
inline constexpr FfnActivation kFfnActivations[] = {
    FfnActivation::SwiGLU, FfnActivation::ReGLU, FfnActivation::DReLU,    FfnActivation::GeGLU,
    FfnActivation::ReLU,   FfnActivation::GELU,  FfnActivation::SwiGLUOai};

inline bool ffn_has_gate(FfnActivation a) {
  return a != FfnActivation::ReLU && a != FfnActivation::GELU;
}

// A non-positive deciding value (the gate, or up without one) means a zero output: the exact
// sparse modes (gate-first, split reads) apply.
inline bool ffn_is_relu_family(FfnActivation a) {
  return a == FfnActivation::ReGLU || a == FfnActivation::DReLU || a == FfnActivation::ReLU;
}

// GELU in llama.cpp's tanh form (above), one value, in f32: the CPU backend and the CUDA
// kernels call this one function.
STRATA_HD inline float gelu_tanh(float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  return 0.5f * u * (1.0f + tanhf(kSqrt2OverPi * (u + kCubic * u * u * u)));
}

// gpt-oss's clamped SwiGLU in llama.cpp's f32 steps (alpha 1.702, limit 7): the gate's part
// x / (1 + exp(-alpha x)) of x = min(g, 7), times clamp(u, -7, 7) + 1.
inline constexpr float kOaiAlpha = 1.702f, kOaiLimit = 7.0f;
STRATA_HD inline float oai_gate(float g) {
  const float x = g < kOaiLimit ? g : kOaiLimit;
  return x / (1.0f + expf(kOaiAlpha * (-x)));
}
STRATA_HD inline float swiglu_oai(float g, float u) {
  const float y = u < -kOaiLimit ? -kOaiLimit : (u > kOaiLimit ? kOaiLimit : u);
  return oai_gate(g) * (y + 1.0f);
}

}  // namespace strata
