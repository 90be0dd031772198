#include "backends/reference_ops.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tensor/column_groups.h"
#include "tensor/expert_mix.h"
#include "tensor/half.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata::reference {

std::vector<float> weight_row(const MatrixView& w, int64_t r) {
  std::vector<float> out(static_cast<size_t>(w.cols));
  if (w.layout == Layout::Interleaved16) {
    const uint64_t group_bytes = interleaved_group_bytes(w.type, w.cols);
    std::vector<uint8_t> plain(row_bytes(w.type, static_cast<uint64_t>(w.cols)));
    extract_row16(w.type, w.data + static_cast<uint64_t>(r / kInterleavedRows) * group_bytes,
                  w.cols, static_cast<int>(r % kInterleavedRows), plain.data());
    dequantize_row(w.type, plain.data(), out.data(), w.cols);
  } else if (w.layout == Layout::ColumnGroups) {  // row r: input r's weights
    for (int64_t i = 0; i < w.cols; ++i) out[static_cast<size_t>(i)] = column_group_weight(w, i, r);
  } else if (w.layout == Layout::ColumnGroupSlots) {
    fail("the reference ops read no split column-group rows (the flash tier's, CPU only)");
  } else {
    dequantize_row(w.type, w.row(r), out.data(), w.cols);
  }
  return out;
}

void rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim, float eps) {
  for (int64_t b = 0; b < n; ++b) {
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += double{x[b * dim + i]} * x[b * dim + i];
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      out[b * dim + i] = static_cast<float>(x[b * dim + i] * scale * weight[i]);
  }
}

void layer_norm(const float* x, const float* weight, const float* bias, float* out, int64_t n,
                int64_t dim, float eps) {
  for (int64_t b = 0; b < n; ++b) {
    const float* xb = x + b * dim;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xb[i];
    mean /= static_cast<double>(dim);
    for (int64_t i = 0; i < dim; ++i) var += (xb[i] - mean) * (xb[i] - mean);
    const double scale = 1.0 / std::sqrt(var / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      out[b * dim + i] = static_cast<float>((xb[i] - mean) * scale * weight[i] +
                                            (bias != nullptr ? bias[i] : 0.0));
  }
}

void add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                 int64_t stride) {
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < ids.size(); ++k) y[b * stride + static_cast<int64_t>(k)] += bias[ids[k]];
}

namespace {
float dot(const std::vector<float>& row, const float* x) {
  double sum = 0;
  for (size_t i = 0; i < row.size(); ++i) sum += double{row[i]} * x[i];
  return static_cast<float>(sum);
}
}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < w.rows; ++r) {
    const std::vector<float> row = weight_row(w, r);
    for (int64_t b = 0; b < n; ++b) y[b * y_stride + r] = dot(row, x + b * w.cols);
  }
}

void gather(const MatrixView& w, std::span<const int32_t> rows, const float* x, int64_t n,
            const uint8_t* need, int64_t need_stride, float* y, int64_t y_stride) {
  for (size_t k = 0; k < rows.size(); ++k) {
    const std::vector<float> row = weight_row(w, rows[k]);
    for (int64_t b = 0; b < n; ++b) {
      const bool wanted = need == nullptr || need[b * need_stride + static_cast<int64_t>(k)] != 0;
      y[b * y_stride + static_cast<int64_t>(k)] = wanted ? dot(row, x + b * w.cols) : 0.0f;
    }
  }
}

void axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c, int64_t c_stride,
          int64_t n, float* out, int64_t out_stride) {
  for (int64_t b = 0; b < n; ++b) {
    std::vector<double> acc(static_cast<size_t>(wt.cols), 0.0);
    for (size_t k = 0; k < rows.size(); ++k) {
      const float coef = c[b * c_stride + static_cast<int64_t>(k)];
      if (coef == 0.0f) continue;
      const std::vector<float> row = weight_row(wt, rows[k]);
      for (int64_t i = 0; i < wt.cols; ++i)
        acc[static_cast<size_t>(i)] += double{coef} * row[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < wt.cols; ++i)
      out[b * out_stride + i] = static_cast<float>(acc[static_cast<size_t>(i)]);
  }
}

namespace {
// A KV cache row of n elements at element `at` (whole blocks of a block type), in and out as F32.
void store_row(void* base, DType t, int64_t at, const float* x, int64_t n) {
  dtype_info(t).quantize(x, static_cast<uint8_t*>(base) + row_bytes(t, static_cast<uint64_t>(at)), n);
}
std::vector<float> load_row(const void* base, DType t, int64_t at, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dtype_info(t).dequantize(static_cast<const uint8_t*>(base) + row_bytes(t, static_cast<uint64_t>(at)), out.data(), n);
  return out;
}
}  // namespace

void rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                    const RopeTable& rope, const KvLayer& kv, const TokenPlaces& at) {
  const bool neox = rope.style == RopeStyle::Neox;
  auto rotate = [&](float* head, int64_t b) {
    for (int64_t i = 0; i < rope.half; ++i) {
      const double c = rope.cos[b * rope.half + i], sn = rope.sin[b * rope.half + i];
      float& e0 = neox ? head[i] : head[2 * i];
      float& e1 = neox ? head[i + rope.half] : head[2 * i + 1];
      const double x0 = e0, x1 = e1;
      e0 = static_cast<float>(x0 * c - x1 * sn);
      e1 = static_cast<float>(x0 * sn + x1 * c);
    }
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t h = 0; h < s.n_head; ++h) rotate(q + b * s.q_dim() + h * s.head_dim, b);
    for (int64_t h = 0; h < s.n_head_kv; ++h) rotate(k + b * s.kv_dim() + h * s.head_dim, b);
    const int64_t row = at.base[b] + at.pos[b];
    store_row(kv.k, kv.k_type, row * kv.kv_dim, k + b * s.kv_dim(), s.kv_dim());
    store_row(kv.v, kv.v_type, row * kv.kv_dim, v + b * s.kv_dim(), s.kv_dim());
  }
}

void attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
               const KvLayer& kv, const TokenPlaces& at, float* out) {
  const int64_t group = s.n_head / s.n_head_kv, hd = s.head_dim;
  const double scale = rule.scale, cap = rule.softcap;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* qh = q + b * s.q_dim() + h * hd;
      const int64_t kvh = h / group, positions = at.pos[b] + 1, base = at.base[b];
      std::vector<double> score(static_cast<size_t>(positions));
      double most = -INFINITY;
      std::vector<std::vector<float>> values(static_cast<size_t>(positions));
      for (int64_t p = 0; p < positions; ++p) {
        const std::vector<float> key = load_row(kv.k, kv.k_type, (base + p) * kv.kv_dim + kvh * hd, hd);
        values[static_cast<size_t>(p)] = load_row(kv.v, kv.v_type, (base + p) * kv.kv_dim + kvh * hd, hd);
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += double{qh[i]} * key[static_cast<size_t>(i)];
        double x = d * scale;
        if (cap > 0) x = cap * std::tanh(x / cap);
        score[static_cast<size_t>(p)] = x;
        most = std::max(most, x);
      }
      const double sink = rule.sinks != nullptr ? rule.sinks[h] : -INFINITY;
      most = std::max(most, sink);
      double total = sink == -INFINITY ? 0.0 : std::exp(sink - most);
      for (double& x : score) total += (x = std::exp(x - most));
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t p = 0; p < positions; ++p)
          acc += score[static_cast<size_t>(p)] * values[static_cast<size_t>(p)][static_cast<size_t>(i)];
        out[b * s.q_dim() + h * hd + i] = static_cast<float>(acc / total);
      }
    }
}

namespace {

// GELU's tanh form in double (ffn_activation.h).
double gelu(double u) {
  return 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
}

}  // namespace

uint64_t sparsify(float* x, int64_t count, float threshold) {
  uint64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::abs(x[i]) <= threshold) x[i] = 0.0f;
    kept += x[i] != 0.0f;
  }
  return kept;
}

uint64_t sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold) {
  uint64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    double a = g;  // the plain FFNs: no gate function
    if (act == FfnActivation::SwiGLU) a = g / (1.0 + std::exp(-g));
    if (act == FfnActivation::ReGLU || act == FfnActivation::DReLU) a = std::max(g, 0.0);
    if (act == FfnActivation::GeGLU) a = gelu(g);
    if (act == FfnActivation::SwiGLUOai) {  // gpt-oss: the gate's part, min(g, 7) clamped first
      const double x = std::min(g, 7.0);
      a = x / (1.0 + std::exp(-1.702 * x));
    }
    if (std::abs(a) <= threshold) gate[i] = 0.0f;
    kept += gate[i] != 0.0f;
  }
  return kept;
}

void activation(FfnActivation act, const float* gate, const float* up, float* h, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate != nullptr ? gate[i] : 0.0, u = up[i];
    double v = 0;
    switch (act) {
      case FfnActivation::SwiGLU:
        v = g / (1.0 + std::exp(-g)) * u;
        break;
      case FfnActivation::ReGLU:
        v = g > 0 ? g * u : 0.0;
        break;
      case FfnActivation::DReLU:
        v = g > 0 && u > 0 ? g * u : 0.0;
        break;
      case FfnActivation::GeGLU:
        v = gelu(g) * u;
        break;
      case FfnActivation::ReLU:
        v = std::max(u, 0.0);
        break;
      case FfnActivation::GELU:
        v = gelu(u);
        break;
      case FfnActivation::SwiGLUOai: {  // in double, from the definition
        const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
        v = x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
        break;
      }
    }
    h[i] = static_cast<float>(v);
  }
}

void mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                 float* out) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < dim; ++j)
      out[b * dim + j] = mix_value(y + b * k * dim + j, weights + b * k, k, dim);
}

void mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                   int64_t expert_ff, int64_t n_expert) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < stride; ++i)
      if (weights[b * n_expert + i / expert_ff] == 0.0f) mask[b * stride + i] = 0;
}

void scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights, int64_t n,
                     int64_t stride, int64_t expert_ff, int64_t n_expert) {
  for (int64_t b = 0; b < n; ++b)
    for (size_t k = 0; k < ids.size(); ++k)
      h[b * stride + static_cast<int64_t>(k)] *= weights[b * n_expert + ids[k] / expert_ff];
}

}  // namespace strata::reference
