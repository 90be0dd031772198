// Qwen2/Qwen2.5 and dense Qwen3 as llama.cpp writes them (convert_hf_to_gguf's Qwen2Model and
// Qwen3Model): LLaMA's matrices, RoPE on NeoX's halves (so the converter leaves q/k rows as
// Hugging Face has them), SwiGLU. Qwen2 adds biases to q, k and v (none on the output
// projection). Qwen3 has no projection bias; instead each query and key head is RMS-normed on
// its own after its projection, before the rotation (attn_q_norm, attn_k_norm: head_dim weights,
// the layer's epsilon), and its head size is its own key (attention.key_length: 128 where
// hidden / heads is 64 in the 0.6B model). The smaller models tie the output head (no
// output.weight).
#include "model/arch/architecture.h"

namespace strata {

namespace {

constexpr VectorName kQwen2Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"}, {LayerVector::AttnQBias, "attn_q.bias"},
    {LayerVector::AttnKBias, "attn_k.bias"},     {LayerVector::AttnVBias, "attn_v.bias"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
};

constexpr VectorName kQwen3Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnQNorm, "attn_q_norm.weight"},
    {LayerVector::AttnKNorm, "attn_k_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
};

Architecture qwen_like(std::string_view name, std::span<const VectorName> vectors) {
  Architecture q;
  q.name = name;
  q.positions = PositionKind::RopeNeox;
  q.ffn = FfnActivation::SwiGLU;
  q.powerinfer_ffn = FfnActivation::SwiGLU;
  q.matrices = llama_layer_matrices();
  q.vectors = vectors;
  return q;
}

}  // namespace

const Architecture& qwen2_architecture() {
  static const Architecture a = qwen_like("qwen2", kQwen2Vectors);
  return a;
}

const Architecture& qwen3_architecture() {
  static const Architecture a = qwen_like("qwen3", kQwen3Vectors);
  return a;
}

}  // namespace strata
