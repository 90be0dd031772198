// OPT as PowerInfer writes it (its `opt` GGUF files): learned absolute positions (HF's table
// has two extra rows in front: position p is row p + 2), pre-norm LayerNorm with biases,
// separate q/k/v, every projection with a bias, a ReLU MLP with biases, the output tied to
// the embedding. PowerInfer's sparse files carry ffn_down_t (and its bias under that name)
// instead of ffn_down.
#include "model/arch/architecture.h"

namespace strata {

namespace {

constexpr MatrixName kMatrices[] = {
    {LayerMatrix::AttnQ, "attn_q.weight"},
    {LayerMatrix::AttnK, "attn_k.weight"},
    {LayerMatrix::AttnV, "attn_v.weight"},
    {LayerMatrix::AttnOutput, "attn_output.weight"},
    {LayerMatrix::FfnUp, "ffn_up.weight"},
    {LayerMatrix::FfnDown, "ffn_down.weight", Presence::Optional},
    {LayerMatrix::FfnDownT, "ffn_down_t.weight", Presence::Optional},
};

constexpr VectorName kVectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnNormBias, "attn_norm.bias"},
    {LayerVector::AttnQBias, "attn_q.bias"},
    {LayerVector::AttnKBias, "attn_k.bias"},
    {LayerVector::AttnVBias, "attn_v.bias"},
    {LayerVector::AttnOutputBias, "attn_output.bias"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::FfnNormBias, "ffn_norm.bias"},
    {LayerVector::FfnUpBias, "ffn_up.bias"},
    {LayerVector::FfnDownBias, "ffn_down.bias"},
    {LayerVector::FfnDownBias, "ffn_down_t.bias"},
};

}  // namespace

const Architecture& opt_architecture() {
  static const Architecture a = [] {
    Architecture o;
    o.name = "opt";
    o.norm = NormKind::Layer;
    o.norm_eps_key = "attention.layer_norm_epsilon";
    o.positions = PositionKind::Learned;
    o.position_offset = 2;
    o.ffn = FfnActivation::ReLU;
    o.powerinfer_ffn = FfnActivation::ReLU;
    o.matrices = kMatrices;
    o.vectors = kVectors;
    o.output_norm_bias = true;
    return o;
  }();
  return a;
}

}  // namespace strata
