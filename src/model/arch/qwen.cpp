// Qwen2/Qwen2.5 and dense Qwen3 as llama.cpp writes them (convert_hf_to_gguf's Qwen2Model and
// Qwen3Model): LLaMA's matrices, RoPE on NeoX's halves (so the converter leaves q/k rows as
// Hugging Face has them), SwiGLU. Qwen2 adds biases to q, k and v (none on the output
// projection). Qwen3 has no projection bias; instead each query and key head is RMS-normed on
// its own after its projection, before the rotation (attn_q_norm, attn_k_norm: head_dim weights,
// the layer's epsilon), and its head size is its own key (attention.key_length: 128 where
// hidden / heads is 64 in the 0.6B model). The smaller models tie the output head (no
// output.weight). Qwen3-MoE (qwen3moe, Qwen3-30B-A3B) is Qwen3's layer whose FFN is always a
// mixture of experts under llama.cpp's expert names, each expert of
// expert_feed_forward_length neurons, the chosen experts' softmax renormalized (norm_topk_prob).
// Qwen2-MoE (qwen2moe, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B) is Qwen2's layer (q/k/v biases) with
// a mixture whose softmax weights are kept as they are (norm_topk_prob false) plus a shared
// expert every token uses (ffn_{gate,up,down}_shexp, expert_shared_feed_forward_length
// neurons), its output weighed by sigmoid(ffn_gate_inp_shexp . x).
#include "model/arch/architecture.h"

namespace strata {

namespace {

// Qwen2's q/k/v biases are in every real file; llama.cpp's loader (create_tensor_qkv) takes them
// as optional, for Qwen3 too, and its graphs add them where present.
constexpr VectorName kQwen2Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
};

constexpr VectorName kQwen3Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnQNorm, "attn_q_norm.weight"},
    {LayerVector::AttnKNorm, "attn_k_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
};

// Qwen3's rerank head (llama.cpp's cls_out), read only by its rank pooling.
constexpr const char* kQwen3Unused[] = {"cls.output.weight"};

Architecture qwen_like(std::string_view name, std::span<const VectorName> vectors) {
  Architecture q;
  q.name = name;
  q.positions = PositionKind::RopeNeox;
  q.ffn = FfnActivation::SwiGLU;
  q.powerinfer_ffn = FfnActivation::SwiGLU;
  q.matrices = llama_layer_matrices();
  q.vectors = vectors;
  q.fused_qkv_allowed = true;
  q.scales.attention = true;  // llama.cpp's Qwen2 graphs leave the FFN's scales unapplied
  return q;
}

constexpr ExpertNames kQwen2MoeExperts = {
    "ffn_gate_inp.weight",  "ffn_gate_exps.weight",      "ffn_up_exps.weight",
    "ffn_down_exps.weight", "ffn_gate.{}.weight",        "ffn_up.{}.weight",
    "ffn_down.{}.weight",   "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",  "ffn_down_shexp.weight",
};

}  // namespace

const Architecture& qwen2_architecture() {
  static const Architecture a = [] {
    Architecture q = qwen_like("qwen2", kQwen2Vectors);
    q.output_bias = true;
    return q;
  }();
  return a;
}

const Architecture& qwen3_architecture() {
  static const Architecture a = [] {
    Architecture q = qwen_like("qwen3", kQwen3Vectors);
    q.scales.ffn = true;
    q.unused_tensors = kQwen3Unused;
    return q;
  }();
  return a;
}

const Architecture& qwen3moe_architecture() {
  static const Architecture a = [] {
    Architecture q = qwen_like("qwen3moe", kQwen3Vectors);
    q.scales.experts = true;
    q.experts = &llama_expert_names();
    q.always_experts = true;
    return q;
  }();
  return a;
}

const Architecture& qwen2moe_architecture() {
  static const Architecture a = [] {
    Architecture q = qwen_like("qwen2moe", kQwen2Vectors);
    q.experts = &kQwen2MoeExperts;
    q.always_experts = true;
    q.renormalize_experts = false;
    return q;
  }();
  return a;
}

}  // namespace strata
