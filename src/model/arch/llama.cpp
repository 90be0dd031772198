// LLaMA as llama.cpp writes it (and Mistral, ReluLLaMA, ProSparse), and PowerInfer's "bamboo"
// (Bamboo, TurboSparse-Mistral: the same layer with a dReLU FFN): RMSNorm, RoPE on adjacent
// pairs (the converter permutes q/k rows for it), separate q/k/v, SwiGLU. What llama.cpp's
// llama loader also accepts, strata reads and uses as its graph does: biases on q/k/v (or one
// fused attn_qkv with its bias), on the output projection and on a dense FFN's gate, up and
// down; Llama 3.1's rope_freqs; the per-tensor scales of FP8/NVFP4 conversions, attention's and
// the FFN's (the experts' too).
// Mixtral is a llama file whose FFNs are mixtures of experts (and TurboSparse-Mixtral a mixture
// of dReLU experts): both may hold expert tensors.
#include "model/arch/architecture.h"

namespace strata {

namespace {

constexpr MatrixName kMatrices[] = {
    {LayerMatrix::AttnQ, "attn_q.weight"},
    {LayerMatrix::AttnK, "attn_k.weight"},
    {LayerMatrix::AttnV, "attn_v.weight"},
    {LayerMatrix::AttnOutput, "attn_output.weight"},
    {LayerMatrix::FfnGate, "ffn_gate.weight"},
    {LayerMatrix::FfnUp, "ffn_up.weight"},
    {LayerMatrix::FfnDown, "ffn_down.weight", Presence::Optional},
    {LayerMatrix::FfnDownT, "ffn_down_t.weight", Presence::Optional},
};

constexpr VectorName kVectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
    {LayerVector::AttnOutputBias, "attn_output.bias", Presence::Optional},
    {LayerVector::FfnGateBias, "ffn_gate.bias", Presence::Optional},
    {LayerVector::FfnUpBias, "ffn_up.bias", Presence::Optional},
    {LayerVector::FfnDownBias, "ffn_down.bias", Presence::Optional},
};

constexpr ExpertNames kExperts = {
    "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
    "ffn_gate.{}.weight",  "ffn_up.{}.weight",     "ffn_down.{}.weight",
};

Architecture llama_like(std::string_view name, FfnActivation ffn, FfnActivation powerinfer) {
  Architecture a;
  a.name = name;
  a.ffn = ffn;
  a.powerinfer_ffn = powerinfer;
  a.matrices = kMatrices;
  a.vectors = kVectors;
  a.experts = &kExperts;
  a.rope_freqs = true;
  a.fused_qkv_allowed = true;
  a.scales = {.attention = true, .ffn = true, .experts = true};
  return a;
}

}  // namespace

std::span<const MatrixName> llama_layer_matrices() {
  return kMatrices;
}

const ExpertNames& llama_expert_names() {
  return kExperts;
}

const Architecture& llama_architecture() {
  // PowerInfer's llama files are ReluLLaMA/ProSparse (ReGLU); llama.cpp's are SwiGLU.
  static const Architecture a = llama_like("llama", FfnActivation::SwiGLU, FfnActivation::ReGLU);
  return a;
}

const Architecture& bamboo_architecture() {
  static const Architecture a = llama_like("bamboo", FfnActivation::DReLU, FfnActivation::DReLU);
  return a;
}

}  // namespace strata
