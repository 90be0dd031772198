#include "offline/predictor_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backends/cpu/kernels.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "offline/text_windows.h"
#include "runtime/session.h"
#include "tensor/quantize.h"

namespace strata {

std::vector<LayerSamples> collect_predictor_samples(
    const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx, int64_t max_tokens,
    ThreadPool& pool, const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& c = model.config;
  std::vector<LayerSamples> s(c.n_layer);
  Session session(model, n_ctx, pool);
  session.set_ffn_observer([&](int64_t l, int64_t n, const float* u, const float* h) {
    LayerSamples& ls = s[l];
    ls.inputs.insert(ls.inputs.end(), u, u + n * c.n_embd);
    for (int64_t i = 0; i < n * c.ffn_neurons(); ++i) ls.active.push_back(h[i] != 0.0f);
    ls.count += n;
  });
  const int32_t bos =
      model.tokenizer && model.tokenizer->add_bos_default() ? model.tokenizer->bos() : -1;
  run_text_windows(session, tokens, bos, max_tokens, progress);
  return s;
}

namespace {

// The two-layer network and its training, on inputs pre-scaled to unit RMS.
class PredictorNet {
 public:
  PredictorNet(int64_t d, int64_t n_ff, int64_t rank, const CpuKernels& k, ThreadPool& pool)
      : d_(d), f_(n_ff), r_(rank), k_(k), pool_(pool), w1_(rank * d), w2_(n_ff * rank) {}

  void init(const std::vector<float>& mean_input, const std::vector<double>& base_rate,
            uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float a1 = std::sqrt(3.0f / d_), a2 = 0.1f * std::sqrt(3.0f / r_);
    for (auto& w : w1_) w = a1 * u(rng);
    for (auto& w : w2_) w = a2 * u(rng);
    // Hidden unit 0 starts as a "bias unit" (about 1 for typical inputs) carrying each neuron's
    // base rate as a logit; training is free to change it.
    double norm2 = 0;
    for (float m : mean_input) norm2 += double{m} * m;
    if (norm2 > 0)
      for (int64_t j = 0; j < d_; ++j) w1_[j] = static_cast<float>(mean_input[j] / norm2);
    for (int64_t i = 0; i < f_; ++i) {
      const double p = std::clamp(base_rate[i], 1e-4, 1 - 1e-4);
      w2_[i * r_] = static_cast<float>(std::log(p / (1 - p)));
    }
    m1_.assign(w1_.size(), 0), v1_.assign(w1_.size(), 0);
    m2_.assign(w2_.size(), 0), v2_.assign(w2_.size(), 0);
  }

  // scores[b][n_ff] for inputs x[b][d]; hidden (pre-activation) kept in hpre.
  void forward(const float* x, int64_t b, std::vector<float>& hpre, std::vector<float>& h,
               std::vector<float>& scores) const {
    hpre.resize(b * r_), h.resize(b * r_), scores.resize(b * f_);
    pool_.parallel_for(b, [&](int64_t b0, int64_t b1, int) {
      for (int64_t t = b0; t < b1; ++t)
        for (int64_t m = 0; m < r_; ++m) {
          hpre[t * r_ + m] = k_.dot_f32(w1_.data() + m * d_, x + t * d_, d_);
          h[t * r_ + m] = std::max(hpre[t * r_ + m], 0.0f);
        }
    });
    pool_.parallel_for(f_, [&](int64_t i0, int64_t i1, int) {
      for (int64_t t = 0; t < b; ++t)
        for (int64_t i = i0; i < i1; ++i)
          scores[t * f_ + i] = k_.dot_f32(w2_.data() + i * r_, h.data() + t * r_, r_);
    });
  }

  void train_step(const float* x, const uint8_t* y, int64_t b, float lr, float pos_weight) {
    forward(x, b, hpre_, h_, s_);
    // dL/ds for weighted binary cross-entropy, averaged over the batch.
    ds_.resize(b * f_);
    for (int64_t i = 0; i < b * f_; ++i) {
      const float p = 1.0f / (1.0f + std::exp(-s_[i]));
      ds_[i] = (y[i] ? pos_weight * (p - 1.0f) : p) / static_cast<float>(b);
    }
    g2_.assign(w2_.size(), 0.0f);
    pool_.parallel_for(f_, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t t = 0; t < b; ++t)
          if (ds_[t * f_ + i] != 0.0f)
            axpy1(h_.data() + t * r_, ds_[t * f_ + i], g2_.data() + i * r_, r_);
    });
    dh_.assign(b * r_, 0.0f);
    pool_.parallel_for(b, [&](int64_t b0, int64_t b1, int) {
      for (int64_t t = b0; t < b1; ++t) {
        for (int64_t i = 0; i < f_; ++i)
          axpy1(w2_.data() + i * r_, ds_[t * f_ + i], dh_.data() + t * r_, r_);
        for (int64_t m = 0; m < r_; ++m)
          if (hpre_[t * r_ + m] <= 0.0f) dh_[t * r_ + m] = 0.0f;
      }
    });
    g1_.assign(w1_.size(), 0.0f);
    pool_.parallel_for(r_, [&](int64_t m0, int64_t m1, int) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t t = 0; t < b; ++t)
          if (dh_[t * r_ + m] != 0.0f) axpy1(x + t * d_, dh_[t * r_ + m], g1_.data() + m * d_, d_);
    });
    ++step_;
    adam(w1_, g1_, m1_, v1_, lr);
    adam(w2_, g2_, m2_, v2_, lr);
  }

  std::vector<float>& w1() { return w1_; }
  // y += c * w with the SIMD kernel.
  void axpy1(const float* w, float c, float* y, int64_t n) const {
    k_.axpy_f32(&w, &c, 1, y, n, nullptr, 0);
  }
  std::vector<float>& w2() { return w2_; }

 private:
  void adam(std::vector<float>& w, const std::vector<float>& g, std::vector<float>& m,
            std::vector<float>& v, float lr) {
    const float b1 = 0.9f, b2 = 0.999f;
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(step_));
    const float c2 = 1.0f - std::pow(b2, static_cast<float>(step_));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + 1e-8f);
    }
  }

  int64_t d_, f_, r_;
  const CpuKernels& k_;
  ThreadPool& pool_;
  std::vector<float> w1_, w2_, m1_, v1_, m2_, v2_, g1_, g2_;
  std::vector<float> hpre_, h_, s_, ds_, dh_;
  int64_t step_ = 0;
};

struct Split {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

}  // namespace

TrainedPredictor train_layer_predictor(const LayerSamples& data, int64_t d, int64_t n_ff,
                                       bool gated, const PredictorTrainingOptions& o,
                                       ThreadPool& pool,
                                       const std::function<void(const std::string&)>& log) {
  const int64_t n = data.count;
  if (n < 50) fail("too few tokens to train predictors ({}); give more text", n);
  const Split train{0, n * 8 / 10}, cal{n * 8 / 10, n * 9 / 10}, held{n * 9 / 10, n};
  // Inputs scaled to unit RMS (the scale is folded into fc1 at the end).
  double sq = 0;
  for (int64_t i = 0; i < train.end * d; ++i) sq += double{data.inputs[i]} * data.inputs[i];
  const float scale =
      static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(train.end * d) + 1e-30));
  std::vector<float> x(data.inputs.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = data.inputs[i] * scale;
  std::vector<float> mean(d, 0.0f);
  std::vector<double> base(n_ff, 0.0);
  for (int64_t t = train.begin; t < train.end; ++t) {
    for (int64_t j = 0; j < d; ++j) mean[j] += x[t * d + j] / static_cast<float>(train.size());
    for (int64_t i = 0; i < n_ff; ++i) base[i] += data.active[t * n_ff + i];
  }
  for (auto& b : base) b /= static_cast<double>(train.size());

  const CpuKernels& k = best_kernels();
  const double ffn_macs = static_cast<double>((gated ? 3 : 2) * d * n_ff);
  TrainedPredictor best;
  bool best_meets = false;
  std::vector<float> hp, h, scores;
  for (int64_t rank : o.rank_ladder) {
    PredictorNet net(d, n_ff, rank, k, pool);
    net.init(mean, base, o.seed + static_cast<uint64_t>(rank));
    std::vector<int64_t> order(train.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(o.seed);
    std::vector<float> xb(static_cast<size_t>(o.batch * d));
    std::vector<uint8_t> yb(static_cast<size_t>(o.batch * n_ff));
    for (int e = 0; e < o.epochs; ++e) {
      std::shuffle(order.begin(), order.end(), rng);
      const float lr = o.learning_rate * (e + 1 == o.epochs ? 0.3f : 1.0f);
      for (int64_t s = 0; s + o.batch <= train.size(); s += o.batch) {
        for (int64_t t = 0; t < o.batch; ++t) {
          const int64_t src = order[s + t];
          std::copy_n(x.begin() + src * d, d, xb.begin() + t * d);
          std::copy_n(data.active.begin() + src * n_ff, n_ff, yb.begin() + t * n_ff);
        }
        net.train_step(xb.data(), yb.data(), o.batch, lr, o.positive_weight);
      }
    }
    // Calibrate the threshold: the (1 - target) quantile of the active neurons' scores.
    std::vector<float> active_scores;
    net.forward(x.data() + cal.begin * d, cal.size(), hp, h, scores);
    for (int64_t i = 0; i < cal.size() * n_ff; ++i)
      if (data.active[cal.begin * n_ff + i]) active_scores.push_back(scores[i]);
    float threshold = 0.0f;
    if (!active_scores.empty()) {
      const size_t q = static_cast<size_t>(
          std::floor((1.0 - o.recall_target) * static_cast<double>(active_scores.size())));
      std::nth_element(active_scores.begin(), active_scores.begin() + q, active_scores.end());
      threshold = active_scores[q];
    }
    net.forward(x.data() + held.begin * d, held.size(), hp, h, scores);
    uint64_t tp = 0, pred = 0, act = 0;
    for (int64_t i = 0; i < held.size() * n_ff; ++i) {
      const bool a = data.active[held.begin * n_ff + i], p = scores[i] >= threshold;
      tp += a && p, pred += p, act += a;
    }
    const double total = static_cast<double>(held.size() * n_ff);
    TrainedPredictor r;
    r.rank = rank;
    r.threshold = threshold;
    r.recall = act ? double(tp) / act : 1.0;
    r.precision = pred ? double(tp) / pred : 1.0;
    r.predicted_density = pred / total;
    r.true_density = act / total;
    r.predictor_share = static_cast<double>(rank * (d + n_ff)) / ffn_macs;
    r.cost_share = r.predictor_share + r.predicted_density;
    if (log)
      log(fmt::format(
          "rank {:>4}: recall {:.4f} precision {:.3f} density {:.3f} (true {:.3f}) "
          "cost {:.1f}% of dense",
          rank, r.recall, r.precision, r.predicted_density, r.true_density, 100 * r.cost_share));
    // A rank "meets" the target when its held-out recall is within 0.01 of it (the threshold
    // was calibrated on other tokens). Among those the cheapest wins; failing all, the best recall.
    const bool meets = r.recall >= o.recall_target - 0.01;
    const bool take = best.rank == 0 ||
                      (meets && (!best_meets || r.cost_share < best.cost_share)) ||
                      (!meets && !best_meets && r.recall > best.recall);
    if (take) {
      r.fc1 = std::move(net.w1());
      r.fc2 = std::move(net.w2());
      for (auto& v : r.fc1) v *= scale;  // the predictor reads unscaled inputs
      best = std::move(r);
      best_meets = meets;
    } else if (meets && best_meets) {
      break;  // the cost rose: larger ranks only cost more
    }
  }
  return best;
}

void write_model_with_predictors(const Model& model, const std::vector<TrainedPredictor>& p,
                                 DType predictor_type, bool keep_down, const std::string& path) {
  const GgufFile& src = *model.file;
  const ModelConfig& c = model.config;
  GgufWriter w(path);
  for (const auto& [key, value] : src.metadata())
    if (key != "general.alignment") w.set(key, value);
  std::vector<GgufValue> thresholds;
  for (const auto& t : p) thresholds.push_back(GgufValue::f32(t.threshold));
  w.set(kPredictorThresholdsKey, GgufValue::array(GgufType::F32, std::move(thresholds)));
  w.set(kFfnActivationKey, GgufValue::str(ffn_activation_name(c.ffn)));

  auto is_replaced = [&](const std::string& name) {
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const std::string pre = fmt::format("blk.{}.", l);
      if (name == pre + "fc1.weight" || name == pre + "fc2.weight" ||
          (!c.moe() && name == pre + "ffn_down_t.weight") ||
          (!c.moe() && !keep_down && name == pre + "ffn_down.weight"))
        return true;
    }
    return false;
  };
  std::vector<const GgufTensorInfo*> kept;
  for (const auto& t : src.tensors())
    if (!is_replaced(t.name)) {
      w.add_tensor(t.name, t.type, t.dims);
      kept.push_back(&t);
    }
  // A mixture keeps its experts as they are (the sparse modes transpose their downs at load);
  // its predictors have a row for every expert's neuron.
  const DType down_type = model.weights.layers[0].ffn_down_t.data != nullptr
                              ? model.weights.layers[0].ffn_down_t.type
                              : model.weights.layers[0].ffn_down.type;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string pre = fmt::format("blk.{}.", l);
    if (!c.moe()) w.add_tensor(pre + "ffn_down_t.weight", down_type, {c.n_embd, c.n_ff});
    w.add_tensor(pre + "fc1.weight", predictor_type, {c.n_embd, p[l].rank});
    w.add_tensor(pre + "fc2.weight", predictor_type, {p[l].rank, c.ffn_neurons()});
  }
  for (const GgufTensorInfo* t : kept) w.write_tensor_data({t->data, t->n_bytes});
  std::vector<uint8_t> buf;
  auto write_rows = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
    const uint64_t rb = row_bytes(predictor_type, cols);
    buf.resize(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(predictor_type, v.data() + r * cols, buf.data() + r * rb, cols);
    w.write_tensor_data(buf);
  };
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = model.weights.layers[l];
    if (c.moe()) {
      // nothing: the experts' tensors were kept
    } else if (lw.ffn_down_t.data != nullptr) {
      w.write_tensor_data({lw.ffn_down_t.data, lw.ffn_down_t.bytes()});
    } else {
      std::vector<uint8_t> storage;
      const MatrixView t = transpose_down(lw.ffn_down, storage);
      w.write_tensor_data({t.data, t.bytes()});
    }
    write_rows(p[l].fc1, p[l].rank, c.n_embd);
    write_rows(p[l].fc2, c.ffn_neurons(), p[l].rank);
  }
  w.finish();
}

}  // namespace strata
