// GLM-4.5 / GLM-4.5-Air / GLM-4.6 (glm4moe) as llama.cpp v0.5.0 reads them
// (src/models/glm4-moe.cpp): RMSNorm; q, k, v with biases (optional in the loader), optional
// per-head q/k RMSNorms (the 355B model's); RoPE on NeoX's halves over the first
// rope.dimension_count of each head (partial: 64 of 128); the FFN's norm stored as
// post_attention_norm. The first leading_dense_block_count layers have a dense SwiGLU FFN of
// feed_forward_length neurons; the others a mixture: a router whose sigmoid scores plus a
// correction bias (exp_probs_b) choose the top k, weighed by the unbiased sigmoids (normalized
// when expert_weights_norm, times expert_weights_scale), plus one ungated shared expert
// (expert_shared_count experts' worth of neurons) every token uses. The multi-token-prediction
// layers after the trunk (nextn_predict_layers) are accepted unused, as llama.cpp's text
// generation leaves them. rope.dimension_sections (M-RoPE) is accepted where, for text, it is
// the plain rotation: every rotated pair in the sections that take the token's position.
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/arch/architecture.h"
#include "model/arch/hparams.h"
#include "model/config.h"

namespace strata {

namespace {

constexpr VectorName kVectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::FfnNorm, "post_attention_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
    {LayerVector::AttnQNorm, "attn_q_norm.weight", Presence::Optional},
    {LayerVector::AttnKNorm, "attn_k_norm.weight", Presence::Optional},
};

constexpr ExpertNames kExperts = {
    .router = "ffn_gate_inp.weight",
    .gate = "ffn_gate_exps.weight",
    .up = "ffn_up_exps.weight",
    .down = "ffn_down_exps.weight",
    .gate_each = "ffn_gate.{}.weight",
    .up_each = "ffn_up.{}.weight",
    .down_each = "ffn_down.{}.weight",
    .shared_gate = nullptr,
    .shared_ffn_gate = "ffn_gate_shexp.weight",
    .shared_ffn_up = "ffn_up_shexp.weight",
    .shared_ffn_down = "ffn_down_shexp.weight",
    .selection_bias = "exp_probs_b.bias",
};

// M-RoPE's sections for text: llama.cpp gives a text token's position to the first three
// sections and 0 to the fourth, so the rotation is RoPE's when no rotated pair is in the fourth.
void check_rope_sections(const GgufFile& f, const std::string& a, const ModelConfig& c) {
  const std::string key = a + "rope.dimension_sections";
  const GgufValue* v = f.find(key);
  if (v == nullptr) return;
  if (v->type != GgufType::Array || v->items.size() < 4)
    fail("'{}': {} must be an array of 4 numbers", f.path(), key);
  int64_t s[4];
  for (size_t i = 0; i < 4; ++i) s[i] = v->items[i].as_int(key);
  if (s[0] <= 0 || s[1] <= 0) return;  // not M-RoPE (llama.cpp's use_mrope)
  const int64_t positioned = s[0] + s[1] + s[2], all = positioned + s[3];
  if (all <= 0 || c.n_rot / 2 > positioned || s[2] < 0 || s[3] < 0)
    fail(
        "'{}': {} [{}, {}, {}, {}] rotates pairs by a position other than the token's "
        "(multimodal M-RoPE), which strata does not support",
        f.path(), key, s[0], s[1], s[2], s[3]);
}

void read_glm4moe(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  read_mixture_rule(f, a, ExpertGating::Sigmoid, c);
  check_rope_sections(f, a, c);
}

void write_glm4moe(const ModelConfig& c, GgufWriter& w) {
  write_mixture_rule(c, c.architecture + ".", w);
}

// GLM-4.5-Air's recipe beyond its shape: the first layer dense (its FFN as wide as the routed
// ones together), sigmoid routing normalized, one shared expert, RoPE on half of each head.
void glm4moe_defaults(ModelConfig& c) {
  c.expert_gating = ExpertGating::Sigmoid;
  c.expert_weights_norm = true;
  if (c.n_layer > 1 && c.n_dense_lead == 0) c.n_dense_lead = 1;
  if (c.n_ff_dense == 0) c.n_ff_dense = c.n_ff * c.n_expert_used;
  if (c.n_ff_shared == 0) c.n_ff_shared = c.n_ff;
  if (c.n_rot == c.head_dim && c.head_dim % 4 == 0) c.n_rot = c.head_dim / 2;
}

}  // namespace

const Architecture& glm4moe_architecture() {
  static const Architecture a = [] {
    Architecture g;
    g.name = "glm4moe";
    g.positions = PositionKind::RopeNeox;
    g.ffn = FfnActivation::SwiGLU;
    g.powerinfer_ffn = FfnActivation::SwiGLU;
    g.matrices = llama_layer_matrices();
    g.vectors = kVectors;
    g.experts = &kExperts;
    g.always_experts = true;
    g.fused_qkv_allowed = true;
    // llama.cpp's GLM graph passes no FFN or expert scales (build_ffn / build_moe_ffn's nulls).
    g.scales = {.attention = true, .ffn = false, .experts = false};
    g.read_hparams = read_glm4moe;
    g.write_hparams = write_glm4moe;
    g.family_defaults = glm4moe_defaults;
    return g;
  }();
  return a;
}

}  // namespace strata
