// gpt-oss (OpenAI's open-weight mixtures, gpt-oss-20b and -120b) as llama.cpp v0.5.0 reads them
// (src/models/openai-moe.cpp): RMSNorm; q, k, v with biases, the output projection with its bias;
// attention sinks (attn_sinks: one logit per query head in each softmax's denominator); a window
// (attention.sliding_window, 128 in the released models) on every other layer, the first first;
// scores scaled by 1 / sqrt(n_rot); RoPE on NeoX's halves (YaRN in the released files). The FFN
// is always a mixture, its norm stored as post_attention_norm: the router with its bias, the top
// k of the biased logits weighed by the softmax over them, each expert's clamped SwiGLU
// (swiglu_oai) with its gate, up and down biases, no per-tensor expert scales.
#include <cmath>

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
    {LayerVector::AttnSinks, "attn_sinks.weight"},
    {LayerVector::AttnOutputBias, "attn_output.bias"},
    {LayerVector::RouterBias, "ffn_gate_inp.bias"},
    {LayerVector::ExpertGateBias, "ffn_gate_exps.bias"},
    {LayerVector::ExpertUpBias, "ffn_up_exps.bias"},
    {LayerVector::ExpertDownBias, "ffn_down_exps.bias"},
    {LayerVector::AttnQBias, "attn_q.bias", Presence::Optional},
    {LayerVector::AttnKBias, "attn_k.bias", Presence::Optional},
    {LayerVector::AttnVBias, "attn_v.bias", Presence::Optional},
};

void read_gpt_oss(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  c.sliding_window = f.get_int(a + "attention.sliding_window");  // required, as in llama.cpp
  if (c.sliding_window < 1 || c.sliding_window > (int64_t{1} << 32))
    fail("'{}': {}attention.sliding_window is {}; expected 1 to 2^32", f.path(), a,
         c.sliding_window);
  read_swa_pattern(f, a, 2, false, c);
  c.rope_freq_base_swa = optional_float(f, a + "rope.freq_base_swa", c.rope_freq_base, 1e-6, 1e30);
  c.rope_freq_scale_swa = c.rope_scaling.freq_scale;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.n_rot));
}

void write_gpt_oss(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.architecture + ".";
  w.set(a + "attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
  write_swa_pattern(c, a, w);
}

void gpt_oss_defaults(ModelConfig& c) {
  if (c.sliding_window == 0) c.sliding_window = 128;
}

}  // namespace

const Architecture& gpt_oss_architecture() {
  static const Architecture a = [] {
    Architecture g;
    g.name = "gpt-oss";
    g.positions = PositionKind::RopeNeox;
    g.ffn = FfnActivation::SwiGLUOai;
    g.powerinfer_ffn = FfnActivation::SwiGLUOai;
    g.matrices = llama_layer_matrices();
    g.vectors = kVectors;
    g.experts = &llama_expert_names();
    g.always_experts = true;
    g.renormalize_experts = true;  // the softmax over the chosen logits
    g.fused_qkv_allowed = true;
    g.scales = {.attention = true, .ffn = false, .experts = false};
    g.read_hparams = read_gpt_oss;
    g.write_hparams = write_gpt_oss;
    g.family_defaults = gpt_oss_defaults;
    return g;
  }();
  return a;
}

}  // namespace strata
