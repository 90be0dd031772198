// Qwen2 and Qwen2.5 as llama.cpp writes them (convert_hf_to_gguf's Qwen2Model): LLaMA's layer
// (RMSNorm, separate q/k/v, SwiGLU) with biases on q, k and v (none on the output projection)
// and RoPE on NeoX's halves (so the converter leaves q/k rows as Hugging Face has them). The
// smaller models tie the output head to the embedding (no output.weight).
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
    {LayerVector::AttnNorm, "attn_norm.weight"}, {LayerVector::AttnQBias, "attn_q.bias"},
    {LayerVector::AttnKBias, "attn_k.bias"},     {LayerVector::AttnVBias, "attn_v.bias"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
};

}  // namespace

const Architecture& qwen2_architecture() {
  static const Architecture a = [] {
    Architecture q;
    q.name = "qwen2";
    q.positions = PositionKind::RopeNeox;
    q.ffn = FfnActivation::SwiGLU;
    q.powerinfer_ffn = FfnActivation::SwiGLU;
    q.matrices = kMatrices;
    q.vectors = kVectors;
    return q;
  }();
  return a;
}

}  // namespace strata
