#include "offline/predictor_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "backends/cpu/kernels.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "model/down_transpose.h"
#include "offline/float_products.h"
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
    multiply_abt(k_, pool_, x, b, w1_.data(), r_, d_, hpre);
    h.resize(hpre.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = std::max(hpre[i], 0.0f);
    multiply_abt(k_, pool_, h.data(), b, w2_.data(), f_, r_, scores);
  }

  // One Adam step on a batch; the gradients as products of whole matrices (transposed where a
  // product sums over the batch).
  void train_step(const float* x, const uint8_t* y, int64_t b, float lr, float pos_weight) {
    forward(x, b, hpre_, h_, s_);
    // dL/ds for weighted binary cross-entropy, averaged over the batch.
    ds_.resize(b * f_);
    pool_.parallel_for(b, [&](int64_t t0, int64_t t1, int) {
      for (int64_t i = t0 * f_; i < t1 * f_; ++i) {
        const float p = 1.0f / (1.0f + std::exp(-s_[i]));
        ds_[i] = (y[i] ? pos_weight * (p - 1.0f) : p) / static_cast<float>(b);
      }
    });
    transpose(pool_, h_.data(), b, r_, h_t_);
    multiply_ab_transposed(k_, pool_, h_t_.data(), r_, ds_.data(), f_, b, g2_);  // [f][r]
    multiply_ab_transposed(k_, pool_, ds_.data(), b, w2_.data(), r_, f_, dh_t_);  // [r][b]
    for (int64_t m = 0; m < r_; ++m)
      for (int64_t t = 0; t < b; ++t)
        if (hpre_[t * r_ + m] <= 0.0f) dh_t_[m * b + t] = 0.0f;
    transpose(pool_, x, b, d_, x_t_);
    multiply_abt(k_, pool_, dh_t_.data(), r_, x_t_.data(), d_, b, g1_);  // [r][d]
    ++step_;
    adam(w1_, g1_, m1_, v1_, lr);
    adam(w2_, g2_, m2_, v2_, lr);
  }

  std::vector<float>& w1() { return w1_; }
  std::vector<float>& w2() { return w2_; }

 private:
  void adam(std::vector<float>& w, const std::vector<float>& g, std::vector<float>& m,
            std::vector<float>& v, float lr) {
    const float b1 = 0.9f, b2 = 0.999f;
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(step_));
    const float c2 = 1.0f - std::pow(b2, static_cast<float>(step_));
    pool_.parallel_for(static_cast<int64_t>(w.size()), [&](int64_t lo, int64_t hi, int) {
      float *wp = w.data(), *mp = m.data(), *vp = v.data();
      const float* gp = g.data();
      for (int64_t i = lo; i < hi; ++i) {
        mp[i] = b1 * mp[i] + (1 - b1) * gp[i];
        vp[i] = b2 * vp[i] + (1 - b2) * gp[i] * gp[i];
        wp[i] -= lr * (mp[i] / c1) / (std::sqrt(vp[i] / c2) + 1e-8f);
      }
    });
  }

  int64_t d_, f_, r_;
  const CpuKernels& k_;
  ThreadPool& pool_;
  std::vector<float> w1_, w2_, m1_, v1_, m2_, v2_, g1_, g2_;
  std::vector<float> hpre_, h_, s_, ds_, h_t_, dh_t_, x_t_;
  int64_t step_ = 0;
};

struct Split {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

// One layer's samples ready for training: inputs scaled to unit RMS (the scale is folded into
// fc1 at the end), the train split's mean input and each neuron's base rate.
struct ScaledSamples {
  const LayerSamples& data;
  int64_t d, n_ff;
  Split train, cal, held;
  float scale = 1;
  std::vector<float> x, mean;
  std::vector<double> base;

  ScaledSamples(const LayerSamples& samples, int64_t d_in, int64_t neurons)
      : data(samples), d(d_in), n_ff(neurons) {
    const int64_t n = data.count;
    train = {0, n * 8 / 10}, cal = {n * 8 / 10, n * 9 / 10}, held = {n * 9 / 10, n};
    double sq = 0;
    for (int64_t i = 0; i < train.end * d; ++i) sq += double{data.inputs[i]} * data.inputs[i];
    scale = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(train.end * d) + 1e-30));
    x.resize(data.inputs.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = data.inputs[i] * scale;
    mean.assign(d, 0.0f);
    base.assign(n_ff, 0.0);
    for (int64_t t = train.begin; t < train.end; ++t) {
      for (int64_t j = 0; j < d; ++j) mean[j] += x[t * d + j] / static_cast<float>(train.size());
      for (int64_t i = 0; i < n_ff; ++i) base[i] += data.active[t * n_ff + i];
    }
    for (auto& b : base) b /= static_cast<double>(train.size());
  }
};

// A rank's training in progress: the net (with Adam's state) and the shuffling, so that
// training it for e epochs and then on to E is the same as training it for E at once.
struct NetTraining {
  PredictorNet net;
  std::mt19937_64 rng;
  std::vector<int64_t> order;
  int epochs_done = 0;

  NetTraining(const ScaledSamples& s, int64_t rank, const PredictorTrainingOptions& o,
              const CpuKernels& k, ThreadPool& pool)
      : net(s.d, s.n_ff, rank, k, pool), rng(o.seed), order(s.train.size()) {
    net.init(s.mean, s.base, o.seed + static_cast<uint64_t>(rank));
    std::iota(order.begin(), order.end(), 0);
  }

  // On to `until` epochs; the learning rate drops on the schedule's last epoch (o.epochs).
  void train_until(int until, const ScaledSamples& s, const PredictorTrainingOptions& o) {
    const int64_t d = s.d, n_ff = s.n_ff;
    std::vector<float> xb(static_cast<size_t>(o.batch * d));
    std::vector<uint8_t> yb(static_cast<size_t>(o.batch * n_ff));
    for (; epochs_done < until; ++epochs_done) {
      std::shuffle(order.begin(), order.end(), rng);
      const float lr = o.learning_rate * (epochs_done + 1 == o.epochs ? 0.3f : 1.0f);
      for (int64_t b = 0; b + o.batch <= s.train.size(); b += o.batch) {
        for (int64_t t = 0; t < o.batch; ++t) {
          const int64_t src = order[b + t];
          std::copy_n(s.x.begin() + src * d, d, xb.begin() + t * d);
          std::copy_n(s.data.active.begin() + src * n_ff, n_ff, yb.begin() + t * n_ff);
        }
        net.train_step(xb.data(), yb.data(), o.batch, lr, o.positive_weight);
      }
    }
  }
};

// The threshold calibrated on the calibration split for the recall target, then recall,
// precision and density measured on the held-out split.
TrainedPredictor evaluate_net(const PredictorNet& net, const ScaledSamples& s, int64_t rank,
                              bool gated, double recall_target) {
  const int64_t d = s.d, n_ff = s.n_ff;
  std::vector<float> hp, h, scores, active_scores;
  net.forward(s.x.data() + s.cal.begin * d, s.cal.size(), hp, h, scores);
  for (int64_t i = 0; i < s.cal.size() * n_ff; ++i)
    if (s.data.active[s.cal.begin * n_ff + i]) active_scores.push_back(scores[i]);
  float threshold = 0.0f;
  if (!active_scores.empty()) {  // the (1 - target) quantile of the active neurons' scores
    const size_t q = static_cast<size_t>(
        std::floor((1.0 - recall_target) * static_cast<double>(active_scores.size())));
    std::nth_element(active_scores.begin(), active_scores.begin() + q, active_scores.end());
    threshold = active_scores[q];
  }
  net.forward(s.x.data() + s.held.begin * d, s.held.size(), hp, h, scores);
  uint64_t tp = 0, pred = 0, act = 0;
  for (int64_t i = 0; i < s.held.size() * n_ff; ++i) {
    const bool a = s.data.active[s.held.begin * n_ff + i], p = scores[i] >= threshold;
    tp += a && p, pred += p, act += a;
  }
  const double total = static_cast<double>(s.held.size() * n_ff);
  const double ffn_macs = static_cast<double>((gated ? 3 : 2) * d * n_ff);
  TrainedPredictor r;
  r.rank = rank;
  r.threshold = threshold;
  r.recall = act ? double(tp) / act : 1.0;
  r.precision = pred ? double(tp) / pred : 1.0;
  r.predicted_density = pred / total;
  r.true_density = act / total;
  r.predictor_share = static_cast<double>(rank * (d + n_ff)) / ffn_macs;
  r.cost_share = r.predictor_share + r.predicted_density;
  return r;
}

std::string describe(const TrainedPredictor& r, int epochs) {
  return fmt::format(
      "rank {:>4} ({} epochs): recall {:.4f} precision {:.3f} density {:.3f} (true {:.3f}) "
      "cost {:.1f}% of dense",
      r.rank, epochs, r.recall, r.precision, r.predicted_density, r.true_density,
      100 * r.cost_share);
}

TrainedPredictor with_weights(TrainedPredictor r, PredictorNet& net, float scale) {
  r.fc1 = std::move(net.w1());
  r.fc2 = std::move(net.w2());
  for (auto& v : r.fc1) v *= scale;  // the predictor reads unscaled inputs
  return r;
}

}  // namespace

TrainedPredictor train_layer_predictor(const LayerSamples& data, int64_t d, int64_t n_ff,
                                       bool gated, const PredictorTrainingOptions& o,
                                       ThreadPool& pool,
                                       const std::function<void(const std::string&)>& log) {
  if (data.count < 50) fail("too few tokens to train predictors ({}); give more text", data.count);
  const ScaledSamples s(data, d, n_ff);
  const CpuKernels& k = best_kernels();
  // The ladder is searched with short training (ranks' costs order the same after a few epochs;
  // on fewer tokens they did not); the chosen rank then trains on to the full epochs.
  const int search_epochs = std::min(o.search_epochs, o.epochs);
  TrainedPredictor best;
  std::unique_ptr<NetTraining> best_training;
  bool best_meets = false;
  for (int64_t rank : o.rank_ladder) {
    auto training = std::make_unique<NetTraining>(s, rank, o, k, pool);
    training->train_until(search_epochs, s, o);
    TrainedPredictor r = evaluate_net(training->net, s, rank, gated, o.recall_target);
    if (log) log(describe(r, search_epochs));
    // A rank "meets" the target when its held-out recall is within 0.01 of it (the threshold
    // was calibrated on other tokens). Among those the cheapest wins; failing all, the best recall.
    const bool meets = r.recall >= o.recall_target - 0.01;
    const bool take = best.rank == 0 ||
                      (meets && (!best_meets || r.cost_share < best.cost_share)) ||
                      (!meets && !best_meets && r.recall > best.recall);
    if (take) {
      best = std::move(r);
      best_training = std::move(training);
      best_meets = meets;
    } else if (meets && best_meets) {
      break;  // the cost rose: larger ranks only cost more
    }
  }
  // The winner trained on from where the search left it.
  best_training->train_until(o.epochs, s, o);
  TrainedPredictor r = evaluate_net(best_training->net, s, best.rank, gated, o.recall_target);
  if (log && search_epochs < o.epochs) log(describe(r, o.epochs));
  return with_weights(std::move(r), best_training->net, s.scale);
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
