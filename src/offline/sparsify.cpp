#include "offline/sparsify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "runtime/session.h"
#include "tensor/input_sparsity.h"

namespace strata {

namespace {

constexpr double kMaxInputSparsity = 0.99;  // an input keeps at least 1% of its values
constexpr uint64_t kMaxSamples = uint64_t{1} << 22;  // per point and layer (16 MiB)

// The calibration text as windows of at most n_ctx tokens, each starting with BOS.
std::vector<std::vector<int32_t>> text_windows(const Model& model,
                                               const std::vector<int32_t>& tokens,
                                               const SparsifyOptions& o) {
  const int32_t bos =
      model.tokenizer && model.tokenizer->add_bos_default() ? model.tokenizer->bos() : -1;
  const int64_t total = std::min<int64_t>(static_cast<int64_t>(tokens.size()), o.max_tokens);
  std::vector<std::vector<int32_t>> windows;
  for (int64_t at = 0; at < total; at += o.n_ctx) {
    const int64_t n = std::min(o.n_ctx, total - at);
    if (n < 2) break;
    windows.emplace_back(tokens.begin() + at, tokens.begin() + at + n);
    if (bos >= 0) windows.back()[0] = bos;
  }
  if (windows.empty()) fail("the calibration text has too few tokens (at least 2)");
  return windows;
}

// The magnitudes of one point's calibration values, sorted: the threshold below which a share s
// of them lies.
class Magnitudes {
 public:
  void reserve(uint64_t total) {
    stride_ = std::max<uint64_t>(1, (total + kMaxSamples - 1) / kMaxSamples);
    values_.clear();
    seen_ = 0;
  }
  void add(float v) {
    if (seen_++ % stride_ == 0) values_.push_back(std::abs(v));
  }
  void sort() { std::sort(values_.begin(), values_.end()); }
  float threshold(double share) const {
    if (share <= 0 || values_.empty()) return 0.0f;
    const auto n = static_cast<double>(values_.size());
    const auto at = static_cast<size_t>(std::clamp(std::ceil(share * n) - 1, 0.0, n - 1));
    return values_[at];
  }

 private:
  std::vector<float> values_;
  uint64_t stride_ = 1, seen_ = 0;
};

// One layer replayed over the whole calibration text: inputs x (every window's rows, in order)
// to outputs y, under the session's thresholds of the moment.
class LayerReplay {
 public:
  LayerReplay(Session& s, const std::vector<std::vector<int32_t>>& windows, int64_t n_embd)
      : s_(s), windows_(windows), n_embd_(n_embd) {}

  void run(int64_t layer, const std::vector<float>& x, std::vector<float>& y) {
    y = x;
    int64_t row = 0;
    for (const auto& w : windows_) {
      const auto len = static_cast<int64_t>(w.size());
      for (int64_t at = 0; at < len; at += Session::kMaxBatch) {
        const int64_t n = std::min(Session::kMaxBatch, len - at);
        s_.replay_layer(layer, y.data() + (row + at) * n_embd_, n, at);
      }
      row += len;
    }
    ++trials;
  }

  void embed(std::vector<float>& x) {
    int64_t row = 0;
    for (const auto& w : windows_) {
      const auto len = static_cast<int64_t>(w.size());
      for (int64_t at = 0; at < len; at += Session::kMaxBatch) {
        const int64_t n = std::min(Session::kMaxBatch, len - at);
        s_.embed_tokens(std::span(w).subspan(static_cast<size_t>(at), static_cast<size_t>(n)),
                        at, x.data() + (row + at) * n_embd_);
      }
      row += len;
    }
  }

  int64_t trials = 0;

 private:
  Session& s_;
  const std::vector<std::vector<int32_t>>& windows_;
  int64_t n_embd_;
};

// The share of the layer's own contribution (y_dense - x) that a trial's output y changes.
double relative_error(const std::vector<float>& x, const std::vector<float>& dense,
                      const std::vector<float>& y) {
  double change = 0, own = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double d = static_cast<double>(y[i]) - dense[i], o = static_cast<double>(dense[i]) - x[i];
    change += d * d;
    own += o * o;
  }
  return own > 0 ? change / own : change;
}

// One layer's calibration: its points' magnitudes (from the dense replay), then its trials.
class LayerCalibration {
 public:
  LayerCalibration(Session& s, LayerReplay& replay, const ModelConfig& c, int64_t layer,
                   const std::vector<float>& x, const std::vector<float>& dense,
                   const std::array<Magnitudes, kSparsityPoints>& magnitudes)
      : s_(s), replay_(replay), layer_(layer), x_(x), dense_(dense), m_(magnitudes) {
    for (MatrixInput k : kAllMatrixInputs) {
      weights_[static_cast<size_t>(k)] = static_cast<double>(matrix_input_weights(k, c));
      total_ += weights_[static_cast<size_t>(k)];
    }
  }

  std::array<float, 4> thresholds(const std::array<double, 4>& s) const {
    std::array<float, 4> t{};
    for (size_t k = 0; k < 4; ++k) t[k] = m_[k].threshold(s[k]);
    return t;
  }

  double teal_error(const std::array<double, 4>& s) {
    const std::array<float, 4> t = thresholds(s);
    s_.sparsifier().set_mode(SparsityMode::Teal);
    s_.sparsifier().set_layer(layer_, {t[0], t[1], t[2], t[3]}, 0.0f);
    return trial();
  }

  // CATS at `level`: (threshold, error).
  std::pair<float, double> cats(double level) {
    const float t = m_[kGatePoint].threshold(level);
    s_.sparsifier().set_mode(SparsityMode::Cats);
    s_.sparsifier().set_layer(layer_, {}, t);
    return {t, trial()};
  }

  LayerSparsity result(const std::array<double, 4>& s, double error) const {
    LayerSparsity r;
    r.sparsity = s;
    r.threshold = thresholds(s);
    r.error = error;
    return r;
  }

  double sparsity(const std::array<double, 4>& s) const {
    double skipped = 0;
    for (size_t k = 0; k < 4; ++k) skipped += s[k] * weights_[k];
    return skipped / total_;
  }

  // TEAL's greedy (sparsify.h): every level in turn from the same path.
  std::vector<LayerSparsity> greedy(const std::vector<float>& levels, double step) {
    std::vector<LayerSparsity> out;
    std::array<double, 4> s{};
    double now = 0;  // the error of s
    std::array<double, 4> score{}, trial_error{};
    std::array<bool, 4> fresh{};
    score.fill(-std::numeric_limits<double>::infinity());
    for (const float level : levels) {
      fresh.fill(false);  // the steps' lengths change with the level
      while (sparsity(s) < level - 1e-9) {
        auto length = [&](size_t k) {
          const double room = (level - sparsity(s)) * total_ / weights_[k];
          return std::min({step, kMaxInputSparsity - s[k], room});
        };
        int best = -1;
        for (size_t k = 0; k < 4; ++k)
          if (length(k) > 1e-9 && (best < 0 || score[k] < score[static_cast<size_t>(best)]))
            best = static_cast<int>(k);
        if (best < 0)
          fail("layer {} cannot reach sparsity {:g} with each input at most {:g} sparse", layer_,
               level, kMaxInputSparsity);
        const auto k = static_cast<size_t>(best);
        if (!fresh[k]) {
          std::array<double, 4> next = s;
          next[k] += length(k);
          trial_error[k] = teal_error(next);
          score[k] = (trial_error[k] - now) / (length(k) * weights_[k] / total_);
          fresh[k] = true;
          continue;
        }
        s[k] += length(k);
        now = trial_error[k];
        fresh.fill(false);
      }
      out.push_back(result(s, now));
    }
    return out;
  }

 private:
  double trial() {
    replay_.run(layer_, x_, y_);
    return relative_error(x_, dense_, y_);
  }

  Session& s_;
  LayerReplay& replay_;
  int64_t layer_;
  const std::vector<float>& x_;
  const std::vector<float>& dense_;
  const std::array<Magnitudes, kSparsityPoints>& m_;
  std::array<double, 4> weights_{};
  double total_ = 0;
  std::vector<float> y_;
};

void check_options(const Model& model, const SparsifyOptions& o) {
  const ModelConfig& c = model.config;
  if (c.moe()) fail("strata sparsify: mixtures of experts are not supported");
  if (model.weights.bundled) fail("strata sparsify reads the dense model, not a bundled one");
  if (o.levels.empty()) fail("--sparsity: at least one level");
  for (size_t i = 0; i < o.levels.size(); ++i)
    if (!(o.levels[i] > 0 && o.levels[i] < kMaxInputSparsity) ||
        (i > 0 && o.levels[i] <= o.levels[i - 1]))
      fail("--sparsity: levels ascend within (0, {:g}), got {:g}", kMaxInputSparsity, o.levels[i]);
  if (!(o.step > 0 && o.step <= 0.5)) fail("--step must be in (0, 0.5], got {:g}", o.step);
  if (o.n_ctx < 2) fail("-c: a calibration window holds at least 2 tokens");
}

}  // namespace

SparsifyResult calibrate_sparsity(const Model& model, const std::vector<int32_t>& tokens,
                                  const SparsifyOptions& o, ThreadPool& pool,
                                  const std::function<void(int64_t, int64_t)>& progress) {
  check_options(model, o);
  const ModelConfig& c = model.config;
  const auto windows = text_windows(model, tokens, o);
  int64_t rows = 0;
  for (const auto& w : windows) rows += static_cast<int64_t>(w.size());
  SessionOptions so;
  so.ffn = FfnMode::Dense;
  Session session(model, std::min(o.n_ctx, c.n_ctx_train), pool, so);
  LayerReplay replay(session, windows, c.n_embd);
  std::vector<float> x(static_cast<size_t>(rows * c.n_embd)), dense;
  replay.embed(x);

  SparsifyResult r;
  r.tokens = rows;
  r.layers.assign(o.levels.size(), std::vector<LayerSparsity>(static_cast<size_t>(c.n_layer)));
  std::array<Magnitudes, kSparsityPoints> magnitudes;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    // The dense replay: the layer's target output and its points' magnitudes.
    for (int p = 0; p < kSparsityPoints; ++p) {
      const int64_t width =
          p == kGatePoint ? c.n_ff : matrix_input_width(static_cast<MatrixInput>(p), c);
      magnitudes[static_cast<size_t>(p)].reserve(static_cast<uint64_t>(rows * width));
    }
    const bool gated = ffn_has_gate(c.ffn);
    session.sparsifier().set_mode(SparsityMode::Off);
    session.set_input_observer([&](int64_t layer, int point, int64_t n, int64_t width,
                                   const float* v) {
      if (layer != l) return;
      Magnitudes& m = magnitudes[static_cast<size_t>(point)];
      for (int64_t i = 0; i < n * width; ++i)
        m.add(point == kGatePoint ? gate_activation(c.ffn, v[i]) : v[i]);
    });
    replay.run(l, x, dense);
    session.set_input_observer({});
    for (auto& m : magnitudes) m.sort();

    LayerCalibration cal(session, replay, c, l, x, dense, magnitudes);
    std::vector<LayerSparsity> per_level;
    if (o.allocation == SparsityAllocation::Greedy) {
      per_level = cal.greedy(o.levels, o.step);
    } else {
      for (const float level : o.levels) {
        const std::array<double, 4> s{level, level, level, level};
        per_level.push_back(cal.result(s, cal.teal_error(s)));
      }
    }
    for (size_t i = 0; i < o.levels.size(); ++i) {
      if (gated) std::tie(per_level[i].cats_threshold, per_level[i].cats_error) = cal.cats(o.levels[i]);
      r.layers[i][static_cast<size_t>(l)] = per_level[i];
    }
    session.sparsifier().set_mode(SparsityMode::Off);
    x.swap(dense);  // the next layer reads this one's dense output
    if (progress) progress(l + 1, c.n_layer);
  }
  r.trials = replay.trials;

  InputThresholds& t = r.thresholds;
  t.levels = o.levels;
  t.n_layer = c.n_layer;
  t.tokens = static_cast<uint64_t>(rows);
  for (const auto& level : r.layers)
    for (const LayerSparsity& ls : level) {
      t.teal.push_back(ls.threshold);
      t.cats.push_back(ls.cats_threshold);
      InputThresholdRow kept{};
      for (size_t i = 0; i < kept.size(); ++i) kept[i] = static_cast<float>(1.0 - ls.sparsity[i]);
      t.teal_kept.push_back(kept);
    }
  return r;
}

void write_model_with_thresholds(const Model& model, const InputThresholds& t,
                                 const std::string& path) {
  const GgufFile& src = *model.file;
  GgufWriter w(path, src.alignment());
  w.set_powerinfer_magic(src.is_powerinfer());
  for (const auto& [key, value] : src.metadata())
    if (key != "general.alignment" && !key.starts_with("strata.sparsity.")) w.set(key, value);
  for (auto& [key, value] : input_threshold_metadata(t)) w.set(key, std::move(value));
  for (const auto& info : src.tensors()) w.add_tensor(info.name, info.type, info.dims);
  for (const auto& info : src.tensors()) w.write_tensor_data({info.data, info.n_bytes});
  w.finish();
}

std::string sparsity_report_html(const SparsifyResult& r, const std::string& model_name) {
  const char* colors[4] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
  std::string html = fmt::format(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>strata sparsify: {}</title>"
      "<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}</style></head><body>"
      "<h1>Activation sparsity of {}</h1><p>{} calibration tokens, {} layer replays. Bars: the "
      "share of each matrix input's values dropped, per layer; the line: the layer output's "
      "relative error (right axis).</p>",
      model_name, model_name, r.tokens, r.trials);
  const auto& levels = r.thresholds.levels;
  for (size_t li = 0; li < levels.size(); ++li) {
    const auto& layers = r.layers[li];
    double max_error = 1e-6;
    for (const auto& ls : layers) max_error = std::max({max_error, ls.error, ls.cats_error});
    const int L = 50, T = 20, PW = std::max<int>(400, static_cast<int>(layers.size()) * 28),
              PH = 200;
    const double slot = static_cast<double>(PW) / static_cast<double>(layers.size());
    std::string svg = fmt::format(
        R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-size="11">)",
        L + PW + 60, T + PH + 40);
    svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)",
                       L, T, PW, PH);
    for (int pct = 0; pct <= 100; pct += 25)
      svg += fmt::format(R"(<text x="{}" y="{:.0f}" text-anchor="end">{}%</text>)", L - 4,
                         T + PH - pct * PH / 100.0 + 4, pct);
    std::string line;
    for (size_t l = 0; l < layers.size(); ++l) {
      const double x0 = L + slot * static_cast<double>(l), bar = slot * 0.8 / 4;
      for (size_t k = 0; k < 4; ++k) {
        const double h = layers[l].sparsity[k] * PH;
        svg += fmt::format(
            R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>layer {} {}: {:.1f}% dropped, threshold {:.4g}</title></rect>)",
            x0 + slot * 0.1 + bar * static_cast<double>(k), T + PH - h, bar, h, colors[k], l,
            matrix_input_name(static_cast<MatrixInput>(k)), 100 * layers[l].sparsity[k],
            layers[l].threshold[k]);
      }
      line += fmt::format("{:.1f},{:.1f} ", x0 + slot / 2, T + PH - layers[l].error / max_error * PH);
      svg += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", x0 + slot / 2,
                         T + PH + 14, l);
    }
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="#222" stroke-width="1.5"/>)",
                       line);
    svg += fmt::format(R"(<text x="{}" y="{}">{:.3g}</text>)", L + PW + 4, T + 10, max_error);
    svg += "</svg>";
    html += fmt::format("<h2>Sparsity {:g}</h2>{}<p>", levels[li], svg);
    for (size_t k = 0; k < 4; ++k)
      html += fmt::format("<span style=\"color:{}\">&#9632; {}</span> ", colors[k],
                          matrix_input_name(static_cast<MatrixInput>(k)));
    html += "</p><table><tr><th>layer</th>";
    for (size_t k = 0; k < 4; ++k)
      html += fmt::format("<th>{}</th>", matrix_input_name(static_cast<MatrixInput>(k)));
    html += "<th>error</th><th>CATS error</th></tr>";
    for (size_t l = 0; l < layers.size(); ++l) {
      html += fmt::format("<tr><td>{}</td>", l);
      for (size_t k = 0; k < 4; ++k) html += fmt::format("<td>{:.1f}%</td>", 100 * layers[l].sparsity[k]);
      html += fmt::format("<td>{:.4f}</td><td>{:.4f}</td></tr>", layers[l].error, layers[l].cats_error);
    }
    html += "</table>";
  }
  return html + "</body></html>\n";
}

}  // namespace strata
