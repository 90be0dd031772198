#include "runtime/session.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/timer.h"
#include "tensor/quantize.h"

namespace strata {

namespace {

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double{x[i]} * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

}  // namespace

Session::Session(const Model& model, int64_t n_ctx, ThreadPool& pool)
    : model_(model), c_(model.config), kernels_(best_kernels()), pool_(pool), n_ctx_(n_ctx) {
  if (n_ctx <= 0) fail("context size must be positive, got {}", n_ctx);
  const int64_t kv_dim = c_.n_head_kv * c_.head_dim, q_dim = c_.n_head * c_.head_dim;
  k_cache_.assign(static_cast<size_t>(c_.n_layer * n_ctx * kv_dim), 0.0f);
  v_cache_.assign(k_cache_.size(), 0.0f);
  x_.resize(c_.n_embd);
  xn_.resize(c_.n_embd);
  q_.resize(q_dim);
  k_.resize(kv_dim);
  v_.resize(kv_dim);
  attn_.resize(q_dim);
  proj_.resize(c_.n_embd);
  gate_.resize(c_.n_ff);
  up_.resize(c_.n_ff);
  logits_.resize(c_.n_vocab);
  scores_.resize(static_cast<size_t>(c_.n_head * n_ctx));
  rope_cos_.resize(c_.n_rot / 2);
  ffn_zeros_.assign(c_.n_layer, 0);
  rope_sin_.resize(c_.n_rot / 2);
}

std::span<const float> Session::eval(std::span<const int32_t> tokens) {
  std::span<const float> logits;
  for (int32_t t : tokens) logits = eval(t);
  return logits;
}

std::span<const float> Session::eval(int32_t token) {
  if (token < 0 || token >= c_.n_vocab)
    fail("token id {} is outside the vocabulary (size {})", token, c_.n_vocab);
  if (n_past_ >= n_ctx_) fail("context is full ({} tokens); use a larger -c", n_ctx_);
  const int64_t pos = n_past_;
  dequantize_row(model_.weights.token_embd.type, model_.weights.token_embd.row(token), x_.data(),
                 c_.n_embd);

  // Rotation angles for this position: theta_i = pos * base^(-2i / n_rot).
  for (int64_t i = 0; i < c_.n_rot / 2; ++i) {
    const double theta = static_cast<double>(pos) *
                         std::pow(static_cast<double>(c_.rope_freq_base),
                                  -2.0 * static_cast<double>(i) / static_cast<double>(c_.n_rot));
    rope_cos_[i] = static_cast<float>(std::cos(theta));
    rope_sin_[i] = static_cast<float>(std::sin(theta));
  }

  for (int64_t l = 0; l < c_.n_layer; ++l) {
    Timer t;
    attention_block(l, pos);
    times_.attention += t.seconds();
    t.reset();
    ffn_block(l);
    times_.ffn += t.seconds();
  }

  Timer t;
  rms_norm(x_.data(), model_.weights.output_norm.data(), xn_.data(), c_.n_embd, c_.rms_eps);
  const MatrixView& out = model_.weights.output;
  input_.prepare(kernels_, xn_.data(), c_.n_embd, needs_q8_input(out.type));
  matvec_multi(kernels_, {{&out, logits_.data()}}, input_, pool_);
  times_.output += t.seconds();
  ++n_past_;
  return logits_;
}

void Session::attention_block(int64_t l, int64_t pos) {
  const LayerWeights& w = model_.weights.layers[l];
  const int64_t hd = c_.head_dim, kv_dim = c_.n_head_kv * hd;
  rms_norm(x_.data(), w.attn_norm.data(), xn_.data(), c_.n_embd, c_.rms_eps);
  input_.prepare(kernels_, xn_.data(), c_.n_embd,
                 needs_q8_input(w.attn_q.type) || needs_q8_input(w.attn_k.type) ||
                     needs_q8_input(w.attn_v.type));
  matvec_multi(kernels_, {{&w.attn_q, q_.data()}, {&w.attn_k, k_.data()}, {&w.attn_v, v_.data()}},
               input_, pool_);

  // Rotary embedding on adjacent pairs (x[2i], x[2i+1]) of each head, as GGUF llama files
  // expect (their converter permutes q/k rows so this matches the HF layout).
  auto rotate = [&](float* head) {
    for (int64_t i = 0; i < c_.n_rot / 2; ++i) {
      const float a = head[2 * i], b = head[2 * i + 1];
      head[2 * i] = a * rope_cos_[i] - b * rope_sin_[i];
      head[2 * i + 1] = a * rope_sin_[i] + b * rope_cos_[i];
    }
  };
  for (int64_t h = 0; h < c_.n_head; ++h) rotate(q_.data() + h * hd);
  for (int64_t h = 0; h < c_.n_head_kv; ++h) rotate(k_.data() + h * hd);

  float* k_layer = k_cache_.data() + l * n_ctx_ * kv_dim;
  float* v_layer = v_cache_.data() + l * n_ctx_ * kv_dim;
  std::copy(k_.begin(), k_.end(), k_layer + pos * kv_dim);
  std::copy(v_.begin(), v_.end(), v_layer + pos * kv_dim);

  const int64_t group = c_.n_head / c_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t n_pos = pos + 1;
  pool_.parallel_for(c_.n_head, [&](int64_t h0, int64_t h1, int) {
    for (int64_t h = h0; h < h1; ++h) {
      const float* q = q_.data() + h * hd;
      const int64_t kvh = h / group;
      float* s = scores_.data() + h * n_ctx_;
      float max = -INFINITY;
      for (int64_t p = 0; p < n_pos; ++p) {
        s[p] = kernels_.dot_f32(k_layer + p * kv_dim + kvh * hd, q, hd) * scale;
        max = std::max(max, s[p]);
      }
      float sum = 0.0f;
      for (int64_t p = 0; p < n_pos; ++p) {
        s[p] = std::exp(s[p] - max);
        sum += s[p];
      }
      float* out = attn_.data() + h * hd;
      std::fill(out, out + hd, 0.0f);
      for (int64_t p = 0; p < n_pos; ++p) {
        const float weight = s[p] / sum;
        const float* v = v_layer + p * kv_dim + kvh * hd;
        for (int64_t i = 0; i < hd; ++i) out[i] += weight * v[i];
      }
    }
  });

  input_.prepare(kernels_, attn_.data(), c_.n_head * hd, needs_q8_input(w.attn_output.type));
  matvec_multi(kernels_, {{&w.attn_output, proj_.data()}}, input_, pool_);
  for (int64_t i = 0; i < c_.n_embd; ++i) x_[i] += proj_[i];
}

void Session::ffn_block(int64_t l) {
  const LayerWeights& w = model_.weights.layers[l];
  rms_norm(x_.data(), w.ffn_norm.data(), xn_.data(), c_.n_embd, c_.rms_eps);
  const bool gated = ffn_has_gate(c_.ffn);
  input_.prepare(kernels_, xn_.data(), c_.n_embd,
                 needs_q8_input(w.ffn_up.type) || (gated && needs_q8_input(w.ffn_gate.type)));
  if (gated) {
    matvec_multi(kernels_, {{&w.ffn_gate, gate_.data()}, {&w.ffn_up, up_.data()}}, input_, pool_);
  } else {
    matvec_multi(kernels_, {{&w.ffn_up, up_.data()}}, input_, pool_);
  }
  float* h = up_.data();
  switch (c_.ffn) {
    case FfnActivation::SwiGLU:
      for (int64_t i = 0; i < c_.n_ff; ++i) h[i] = silu(gate_[i]) * up_[i];
      break;
    case FfnActivation::ReGLU:
      for (int64_t i = 0; i < c_.n_ff; ++i) h[i] = gate_[i] > 0.0f ? gate_[i] * up_[i] : 0.0f;
      break;
    case FfnActivation::DReLU:
      for (int64_t i = 0; i < c_.n_ff; ++i)
        h[i] = (gate_[i] > 0.0f && up_[i] > 0.0f) ? gate_[i] * up_[i] : 0.0f;
      break;
    case FfnActivation::ReLU:
      for (int64_t i = 0; i < c_.n_ff; ++i) h[i] = std::max(up_[i], 0.0f);
      break;
  }
  uint64_t zeros = 0;
  for (int64_t i = 0; i < c_.n_ff; ++i) zeros += h[i] == 0.0f;
  ffn_zeros_[l] += zeros;
  if (l == 0) ffn_activations_ += static_cast<uint64_t>(c_.n_ff);
  input_.prepare(kernels_, h, c_.n_ff, needs_q8_input(w.ffn_down.type));
  matvec_multi(kernels_, {{&w.ffn_down, proj_.data()}}, input_, pool_);
  for (int64_t i = 0; i < c_.n_embd; ++i) x_[i] += proj_[i];
}

}  // namespace strata
