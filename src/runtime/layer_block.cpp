// The layer block: one layer of a batch as its architecture wires it (model/arch/), on one
// part (device) of the session. Sequential (LLaMA, OPT): x += attn(norm(x)), then
// x += ffn(ffn_norm(x)). Parallel (Falcon): attention and FFN both read the layer's input,
// x += (ffn(attn_norm(x)) + attn(norm'(x))), in llama.cpp's order of additions; norm' is
// attn_norm_2 where the file has it (Falcon-40B: llama.cpp's converter writes HF's ln_attn
// there and ln_mlp as attn_norm), else attn_norm itself (Falcon-7B: one norm for both).
// A sandwich (Gemma 2/3): attention's and the FFN's outputs RMS-normed (post_attention_norm,
// post_ffw_norm) before their residual adds, where the layer has those norms.
#include "runtime/device_part.h"
#include "runtime/ffn_executor.h"
#include "runtime/kv_cache.h"
#include "runtime/lora_products.h"
#include "runtime/resident_weights.h"
#include "runtime/session.h"
#include "runtime/workspace.h"

namespace strata {

int64_t Session::rope_half() const {
  return c_.arch->rope() ? c_.n_rot / 2 : 0;
}

void Session::norm(Backend& be, const float* x, const float* weight, const float* bias, float* out,
                   int64_t n) {
  if (c_.arch->norm == NormKind::Layer)
    be.layer_norm(x, weight, bias, out, n, c_.n_embd, c_.norm_eps);
  else
    be.rms_norm(x, weight, out, n, c_.n_embd, c_.norm_eps);
}

void Session::layer(DevicePart& p, int64_t l, int64_t n) {
  const ResidentLayer& w = p.weights->layer(l);
  Workspace& ws = p.ws;
  Backend& be = p.backend;
  const int64_t count = n * c_.n_embd;
  const bool parallel = c_.arch->residual == ResidualKind::Parallel;
  const double mark = timeline_now(timeline_);
  Event start = be.record();
  // A parallel layer's attention reads attn_norm_2 where there is one; everything else attn_norm.
  const bool second = parallel && w.vec(LayerVector::AttnNorm2) != nullptr;
  norm(be, ws.x, w.vec(second ? LayerVector::AttnNorm2 : LayerVector::AttnNorm),
       w.vec(second ? LayerVector::AttnNorm2Bias : LayerVector::AttnNormBias), ws.xn, n);
  float* attn_y = parallel ? ws.attn_out : ws.proj;
  attention_block(p, l, n, attn_y);
  if (const float* post = w.vec(LayerVector::AttnPostNorm))
    be.rms_norm(attn_y, post, attn_y, n, c_.n_embd, c_.norm_eps);
  if (parallel) {
    // The FFN reads the layer's input through attn_norm (again, when attention's was it too).
    norm(be, ws.x, w.vec(LayerVector::AttnNorm), w.vec(LayerVector::AttnNormBias), ws.xn, n);
  } else {
    be.add(ws.x, ws.proj, count);
    norm(be, ws.x, w.vec(LayerVector::FfnNorm), w.vec(LayerVector::FfnNormBias), ws.xn, n);
  }
  spans_.add(start, be.record(), &times_.attention, 1, &be);
  timeline_span(timeline_, TimelinePart::Attention, l, mark);
  start = be.record();
  p.ffn->run(l, n, clock_ + n - 1, ffn_stats_[static_cast<size_t>(l)], p.counter(l), times_, spans_,
             observer_);
  if (const float* post = w.vec(LayerVector::FfnPostNorm))
    be.rms_norm(ws.proj, post, ws.proj, n, c_.n_embd, c_.norm_eps);
  if (parallel) be.add(ws.proj, ws.attn_out, count);
  be.add(ws.x, ws.proj, count);
  spans_.add(start, be.record(), &times_.ffn, 1, &be);
}

void Session::attention_block(DevicePart& p, int64_t l, int64_t n, float* out) {
  const ResidentLayer& w = p.weights->layer(l);
  const HeadShape heads{c_.n_head, c_.n_head_kv, c_.head_dim};
  const int64_t q_dim = heads.q_dim(), kv_dim = heads.kv_dim();
  Backend& be = p.backend;
  Workspace& ws = p.ws;
  // TEAL's points: the attention's input, then its output (the FFN's are the executor's).
  const int input = static_cast<int>(MatrixInput::Attention);
  const int output = static_cast<int>(MatrixInput::AttentionOutput);
  const bool columns = p.columns != nullptr && use_columns(n);
  const LayerColumns* cols = columns ? &w.columns : nullptr;
  if (cols != nullptr && cols->attention()) {
    if (cols->attn_qkv.data != nullptr) {
      const ColumnProducts::Part qkv[3] = {{ws.q, q_dim}, {ws.k, kv_dim}, {ws.v, kv_dim}};
      p.columns->run_fused(l, input, ws.xn, n, c_.n_embd, cols->attn_qkv, qkv);
    } else {
      const ColumnProducts::Job qkv[3] = {{&cols->attn_q, ws.q, q_dim},
                                          {&cols->attn_k, ws.k, kv_dim},
                                          {&cols->attn_v, ws.v, kv_dim}};
      p.columns->run(l, input, ws.xn, n, c_.n_embd, qkv);
    }
  } else {
    sparsifier_->apply(be, l, input, ws.xn, n, p.sparsity_counters(l));
    be.prepare(*p.in, ws.xn, c_.n_embd, n, {w.attn_q.type, w.attn_k.type, w.attn_v.type});
    const RowsJob qkv[3] = {
        {&w.attn_q, ws.q, q_dim}, {&w.attn_k, ws.k, kv_dim}, {&w.attn_v, ws.v, kv_dim}};
    be.matmul(qkv, *p.in);
    if (lora_ != nullptr) {
      lora_->add(lora_->find(l, LayerMatrix::AttnQ), ws.xn, n, ws.q, q_dim);
      lora_->add(lora_->find(l, LayerMatrix::AttnK), ws.xn, n, ws.k, kv_dim);
      lora_->add(lora_->find(l, LayerMatrix::AttnV), ws.xn, n, ws.v, kv_dim);
    }
  }
  for (auto [bias, y, dim] : {std::tuple{LayerVector::AttnQBias, ws.q, q_dim},
                              {LayerVector::AttnKBias, ws.k, kv_dim},
                              {LayerVector::AttnVBias, ws.v, kv_dim}})
    if (const float* b = w.vec(bias)) be.add_bias(y, b, n, dim);
  // Qwen3: each query and key head RMS-normed on its own, before the rotation.
  if (const float* qn = w.vec(LayerVector::AttnQNorm))
    be.rms_norm(ws.q, qn, ws.q, n * c_.n_head, c_.head_dim, c_.norm_eps);
  if (const float* kn = w.vec(LayerVector::AttnKNorm))
    be.rms_norm(ws.k, kn, ws.k, n * c_.n_head_kv, c_.head_dim, c_.norm_eps);
  const KvLayer kv = p.kv_layer(l);
  const TokenPlaces places{pos_.data(), base_.data()};
  const RopeStyle style =
      c_.arch->positions == PositionKind::RopeNeox ? RopeStyle::Neox : RopeStyle::Adjacent;
  // A windowed layer with a RoPE of its own reads the second table, n rows in.
  const bool windowed = c_.windowed(l);
  const int64_t table = windowed && c_.swa_rope_differs() ? n * rope_half() : 0;
  be.rope_and_store(ws.q, ws.k, ws.v, n, heads,
                    {ws.rope_cos + table, ws.rope_sin + table, rope_half(), style}, kv, places);
  // A sliding window is the cache rows from its first: every backend's attention as it is.
  const TokenPlaces seen = windowed ? TokenPlaces{seen_pos_.data(), seen_base_.data(), base_.data()}
                                    : places;
  const ScoreRule rule{c_.score_scale(), c_.attention_softcap, w.vec(LayerVector::AttnSinks)};
  be.attention(ws.q, n, heads, rule, kv, seen, n_ctx_, ws.scores, ws.attn);
  if (cols != nullptr && cols->attn_output.data != nullptr) {
    const ColumnProducts::Job o{&cols->attn_output, out, c_.n_embd};
    p.columns->run(l, output, ws.attn, n, q_dim, std::span(&o, 1));
  } else {
    sparsifier_->apply(be, l, output, ws.attn, n, p.sparsity_counters(l));
    be.prepare(*p.in, ws.attn, q_dim, n, {w.attn_output.type});
    const RowsJob o{&w.attn_output, out, c_.n_embd};
    be.matmul(std::span(&o, 1), *p.in);
    if (lora_ != nullptr)
      lora_->add(lora_->find(l, LayerMatrix::AttnOutput), ws.attn, n, out, c_.n_embd);
  }
  if (const float* b = w.vec(LayerVector::AttnOutputBias)) be.add_bias(out, b, n, c_.n_embd);
}

}  // namespace strata
