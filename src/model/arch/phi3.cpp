// Phi-3 and Phi-4-mini as llama.cpp v0.5.0 reads them (src/models/phi3.cpp): RMSNorm, one fused
// attn_qkv (or q, k, v), the output projection, and one fused ffn_up of 2 n_ff rows, gate then up
// (ggml_swiglu: silu of the first half times the second), split at load into row views; RoPE on
// NeoX's halves; the head tied where output.weight is absent. LongRoPE (the 128k models): the
// divisor tables rope_factors_long/short.weight, the long one where a sequence's context exceeds
// rope.scaling.original_context_length, with rope.scaling.attn_factor scaling cos and sin (the
// converter's sqrt(1 + ln(s) / ln(orig))); the files carry no rope.scaling.type for it. The
// sliding window Phi-3's configs name is ignored, as llama.cpp's loader ignores it.
#include "model/arch/architecture.h"

namespace strata {

namespace {

constexpr MatrixName kMatrices[] = {
    {LayerMatrix::AttnQ, "attn_q.weight"},     {LayerMatrix::AttnK, "attn_k.weight"},
    {LayerMatrix::AttnV, "attn_v.weight"},     {LayerMatrix::AttnOutput, "attn_output.weight"},
    {LayerMatrix::FfnGateUp, "ffn_up.weight"}, {LayerMatrix::FfnDown, "ffn_down.weight"},
};

constexpr VectorName kVectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
};

}  // namespace

const Architecture& phi3_architecture() {
  static const Architecture a = [] {
    Architecture p;
    p.name = "phi3";
    p.positions = PositionKind::RopeNeox;
    p.ffn = FfnActivation::SwiGLU;
    p.powerinfer_ffn = FfnActivation::SwiGLU;
    p.matrices = kMatrices;
    p.vectors = kVectors;
    p.fused_qkv_allowed = true;
    p.rope_factor_pair = true;
    p.scales.attention = true;  // its graph passes wo_s and the q/k/v scales, no FFN scale
    return p;
  }();
  return a;
}

}  // namespace strata
