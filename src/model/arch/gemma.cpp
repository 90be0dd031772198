// Gemma 2 and Gemma 3 (text) as llama.cpp v0.5.0 reads them (src/models/gemma2.cpp, gemma3.cpp):
// LLaMA's matrices with a sandwich of RMSNorms (post_attention_norm on attention's output and
// post_ffw_norm on the FFN's, each before its residual add), the embedding times sqrt(n_embd),
// RoPE on NeoX's halves, GeGLU (gelu(gate) * up, tanh form). The converter stores each RMSNorm
// weight as Hugging Face's 1 + w, so the norms are plain RMSNorms here.
// Gemma 2: sliding-window attention on every other layer (the first of each pair; window 4096 by
// default), attention scores soft-capped at attn_logit_softcapping (50) and the logits at
// final_logit_softcapping (30), the head always the embedding. Gemma 3: each query and key head
// RMS-normed before the rotation (as Qwen3), five of six layers windowed with a RoPE of their
// own (rope.freq_base_swa, 10000, unscaled; the global layers take rope.freq_base and the file's
// scaling), the logits soft-capped only when the file says. Both scale the scores by
// 1 / sqrt(head_dim), except the 27B shapes (46 and 62 layers): 1 / sqrt(n_embd / n_head), as
// Google's query_pre_attn_scalar and llama.cpp's graph.
#include <cmath>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/arch/architecture.h"
#include "model/arch/hparams.h"
#include "model/config.h"

namespace strata {

namespace {

constexpr VectorName kGemma2Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnPostNorm, "post_attention_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::FfnPostNorm, "post_ffw_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
};

constexpr VectorName kGemma3Vectors[] = {
    {LayerVector::AttnNorm, "attn_norm.weight"},
    {LayerVector::AttnQNorm, "attn_q_norm.weight"},
    {LayerVector::AttnKNorm, "attn_k_norm.weight"},
    {LayerVector::AttnPostNorm, "post_attention_norm.weight"},
    {LayerVector::FfnNorm, "ffn_norm.weight"},
    {LayerVector::FfnPostNorm, "post_ffw_norm.weight"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
};

constexpr double kMaxCap = 1e6, kMinCap = 1e-6;

// Google's query_pre_attn_scalar as llama.cpp derives it from the layer count.
void read_attention_scale(ModelConfig& c, int64_t layers_27b) {
  const int64_t d = c.n_layer == layers_27b ? c.n_embd / c.n_head : c.head_dim;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(d));
}

void read_gemma2(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  c.sliding_window = f.get_int(a + "attention.sliding_window", 4096);
  if (c.sliding_window < 1 || c.sliding_window > (int64_t{1} << 32))
    fail("'{}': {}attention.sliding_window is {}; expected 1 to 2^32", f.path(), a,
         c.sliding_window);
  read_swa_pattern(f, a, 2, false, c);
  c.rope_freq_base_swa = optional_float(f, a + "rope.freq_base_swa", c.rope_freq_base, 1e-6, 1e30);
  c.rope_freq_scale_swa = c.rope_scaling.freq_scale;
  c.attention_softcap = optional_float(f, a + "attn_logit_softcapping", 50.0f, kMinCap, kMaxCap);
  c.final_softcap = optional_float(f, a + "final_logit_softcapping", 30.0f, kMinCap, kMaxCap);
  read_attention_scale(c, 46);
}

void read_gemma3(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  c.sliding_window = f.get_int(a + "attention.sliding_window", 0);
  if (c.sliding_window < 0 || c.sliding_window > (int64_t{1} << 32))
    fail("'{}': {}attention.sliding_window is {}; expected 0 (none) to 2^32", f.path(), a,
         c.sliding_window);
  if (c.sliding_window > 0) {
    read_swa_pattern(f, a, 6, false, c);
    c.rope_freq_base_swa = optional_float(f, a + "rope.freq_base_swa", 10000.0f, 1e-6, 1e30);
    c.rope_freq_scale_swa = 1.0f;
  }
  // 0 (llama.cpp's "none") is allowed here, unlike Gemma 2's.
  c.final_softcap = optional_float(f, a + "final_logit_softcapping", 0.0f, 0.0, kMaxCap);
  read_attention_scale(c, 62);
}

void write_gemma(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.architecture + ".";
  if (c.sliding_window > 0) {
    w.set(a + "attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
    write_swa_pattern(c, a, w);
    if (c.rope_freq_base_swa > 0.0f)
      w.set(a + "rope.freq_base_swa", GgufValue::f32(c.rope_freq_base_swa));
  }
  if (c.attention_softcap > 0.0f)
    w.set(a + "attn_logit_softcapping", GgufValue::f32(c.attention_softcap));
  // Absent keys read back as the family's defaults (Gemma 2's 50 and 30).
  if (c.final_softcap > 0.0f) w.set(a + "final_logit_softcapping", GgufValue::f32(c.final_softcap));
}

// Every Gemma 2 model's caps; every Gemma 3 model's RoPE: rope_theta 1e6 on the global layers,
// rope_local_base_freq 1e4 on the windowed ones.
void gemma2_defaults(ModelConfig& c) {
  c.attention_softcap = 50.0f;
  c.final_softcap = 30.0f;
}

void gemma3_defaults(ModelConfig& c) {
  c.rope_freq_base = 1e6f;
  c.rope_freq_base_swa = 1e4f;
}

Architecture gemma_like(std::string_view name, std::span<const VectorName> vectors) {
  Architecture g;
  g.name = name;
  g.positions = PositionKind::RopeNeox;
  g.ffn = FfnActivation::GeGLU;
  g.powerinfer_ffn = FfnActivation::GeGLU;
  g.matrices = llama_layer_matrices();
  g.vectors = vectors;
  g.fused_qkv_allowed = true;
  g.scale_embedding = true;
  g.write_hparams = write_gemma;
  return g;
}

}  // namespace

const Architecture& gemma2_architecture() {
  static const Architecture a = [] {
    Architecture g = gemma_like("gemma2", kGemma2Vectors);
    g.read_hparams = read_gemma2;
    g.family_defaults = gemma2_defaults;
    g.head_is_embedding = true;
    return g;
  }();
  return a;
}

const Architecture& gemma3_architecture() {
  static const Architecture a = [] {
    Architecture g = gemma_like("gemma3", kGemma3Vectors);
    g.read_hparams = read_gemma3;
    g.family_defaults = gemma3_defaults;
    return g;
  }();
  return a;
}

}  // namespace strata
