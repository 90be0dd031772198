// Falcon as llama.cpp writes it (convert_hf_to_gguf's FalconModel) and PowerInfer's ReluFalcon:
// LayerNorm with biases, RoPE on NeoX's halves, one fused q/k/v matrix without biases (rows: all
// query heads, then the key heads, then the value heads), attention and MLP in parallel on the
// layer's input. Falcon-7B has one input norm for both; Falcon-40B (new_decoder_architecture)
// two: attn_norm_2 (HF's ln_attn) for attention and attn_norm (HF's ln_mlp) for the MLP, as
// llama.cpp's converter names them and its falcon graph reads them. The MLP is GELU (ReLU in
// ReluFalcon) without biases; feed_forward_length is written (4 x hidden).
#include "model/arch/architecture.h"

namespace strata {

namespace {

constexpr MatrixName kMatrices[] = {
    {LayerMatrix::AttnQkv, "attn_qkv.weight"},
    {LayerMatrix::AttnOutput, "attn_output.weight"},
    {LayerMatrix::FfnUp, "ffn_up.weight"},
    {LayerMatrix::FfnDown, "ffn_down.weight", Presence::Optional},
    {LayerMatrix::FfnDownT, "ffn_down_t.weight", Presence::Optional},
};

constexpr VectorName kVectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnNormBias, "attn_norm.bias"},
    {LayerVector::AttnNorm2, "attn_norm_2.weight", Presence::Optional},
    {LayerVector::AttnNorm2Bias, "attn_norm_2.bias", Presence::Optional},
};

}  // namespace

const Architecture& falcon_architecture() {
  static const Architecture a = [] {
    Architecture f;
    f.name = "falcon";
    f.norm = NormKind::Layer;
    f.norm_eps_key = "attention.layer_norm_epsilon";
    f.positions = PositionKind::RopeNeox;
    f.residual = ResidualKind::Parallel;
    f.ffn = FfnActivation::GELU;
    f.powerinfer_ffn = FfnActivation::ReLU;
    f.matrices = kMatrices;
    f.vectors = kVectors;
    f.output_norm_bias = true;
    f.quant_rules = QuantRules::Falcon;
    return f;
  }();
  return a;
}

}  // namespace strata
