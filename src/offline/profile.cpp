#include "offline/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "core/content_hash.h"
#include "core/error.h"
#include "format/gguf_writer.h"
#include "offline/text_windows.h"
#include "runtime/session.h"

namespace strata {

namespace {
constexpr const char* kProfileArch = "strata-profile";
}

std::string model_hash(const Model& model) {
  return content_hash_hex(model.file->bytes(), model.file->file_size());
}

NeuronProfile profile_model(const Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                            int64_t max_tokens, ThreadPool& pool,
                            const std::function<void(int64_t, int64_t)>& progress,
                            FfnMode mode) {
  const ModelConfig& c = model.config;
  // A mixture's every expert's neurons (ModelConfig::ffn_neurons), as the sparse modes place them.
  const int64_t neurons = c.ffn_neurons();
  NeuronProfile p;
  p.model_hash = model_hash(model);
  p.model_file = model.file->path();
  p.ffn_mode = mode == FfnMode::Predict ? "predict" : "dense";
  p.counts.assign(c.n_layer, std::vector<uint32_t>(neurons, 0));
  SessionOptions options;
  options.ffn = mode == FfnMode::Predict ? FfnMode::Predict : FfnMode::Dense;
  Session session(model, n_ctx, pool, options);
  // Per layer: the last token index at which each neuron was used, tokens seen, and counts.
  std::vector<std::vector<int64_t>> last(c.n_layer, std::vector<int64_t>(neurons, INT64_MIN / 2));
  std::vector<int64_t> seen(c.n_layer, 0);
  std::vector<uint64_t> active(c.n_layer, 0), reused(c.n_layer, 0);
  const size_t row = static_cast<size_t>((neurons + 7) / 8);
  p.selections.assign(c.n_layer, {});
  auto count_token = [&](int64_t l, auto&& used) {
    uint32_t* count = p.counts[l].data();
    int64_t* last_used = last[l].data();
    const int64_t t = seen[l]++;
    uint8_t* bits = nullptr;
    if (static_cast<uint64_t>(t) < kSelectedTokens) {
      std::vector<uint8_t>& sel = p.selections[static_cast<size_t>(l)];
      sel.resize(sel.size() + row, 0);
      bits = sel.data() + sel.size() - row;
    }
    for (int64_t i = 0; i < neurons; ++i) {
      if (!used(i)) continue;
      ++count[i];
      ++active[l];
      reused[l] += last_used[i] >= t - kReuseWindow;
      last_used[i] = t;
      if (bits != nullptr) bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    }
  };
  if (options.ffn == FfnMode::Dense)
    session.set_ffn_observer([&](int64_t l, int64_t n, const float*, const float* h) {
      for (int64_t b = 0; b < n; ++b)
        count_token(l, [&](int64_t i) { return h[b * neurons + i] != 0.0f; });
    });
  else
    session.set_selection_observer([&](int64_t l, int64_t n, int64_t, const uint8_t* selected) {
      for (int64_t b = 0; b < n; ++b)
        count_token(l, [&](int64_t i) { return selected[b * neurons + i] != 0; });
    });
  const int32_t bos =
      model.tokenizer && model.tokenizer->add_bos_default() ? model.tokenizer->bos() : -1;
  p.tokens = static_cast<uint64_t>(run_text_windows(session, tokens, bos, max_tokens, progress));
  p.selected_tokens = std::min<uint64_t>(p.tokens, kSelectedTokens);
  for (int64_t l = 0; l < c.n_layer; ++l)
    p.window_reuse.push_back(active[l] > 0 ? static_cast<double>(reused[l]) / active[l] : 0.0);
  return p;
}

LayerProfileSummary summarize_layer(const std::vector<uint32_t>& counts, uint64_t tokens) {
  LayerProfileSummary s;
  std::vector<uint32_t> sorted = counts;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double total = std::accumulate(sorted.begin(), sorted.end(), 0.0);
  const double n = static_cast<double>(sorted.size());
  s.sparsity = tokens > 0 ? 1.0 - total / (n * static_cast<double>(tokens)) : 0.0;
  std::vector<double> cum(sorted.size() + 1, 0.0);
  for (size_t i = 0; i < sorted.size(); ++i) cum[i + 1] = cum[i] + sorted[i];
  auto share_for = [&](double q) {
    if (total == 0) return 0.0;
    const auto it = std::lower_bound(cum.begin(), cum.end(), q * total);
    return static_cast<double>(it - cum.begin()) / n;
  };
  s.neurons_for_50 = share_for(0.5);
  s.neurons_for_80 = share_for(0.8);
  s.neurons_for_95 = share_for(0.95);
  for (int x = 0; x <= 100; ++x) {
    const size_t k = static_cast<size_t>(std::llround(n * x / 100.0));
    s.curve.push_back(total > 0 ? cum[k] / total : 0.0);
  }
  return s;
}

void write_profile(const NeuronProfile& p, const std::string& path) {
  GgufWriter w(path);
  w.set("general.architecture", GgufValue::str(kProfileArch));
  w.set("strata.profile.model_hash", GgufValue::str(p.model_hash));
  w.set("strata.profile.model_file", GgufValue::str(p.model_file));
  w.set("strata.profile.text", GgufValue::str(p.text));
  w.set("strata.profile.tokens", GgufValue::u64(p.tokens));
  w.set("strata.profile.layer_count", GgufValue::u32(static_cast<uint32_t>(p.counts.size())));
  w.set("strata.profile.ffn_mode", GgufValue::str(p.ffn_mode));
  if (!p.window_reuse.empty()) {
    std::vector<GgufValue> reuse;
    for (double r : p.window_reuse) reuse.push_back(GgufValue::f32(static_cast<float>(r)));
    w.set("strata.profile.window_reuse", GgufValue::array(GgufType::F32, std::move(reuse)));
    w.set("strata.profile.reuse_window", GgufValue::u32(kReuseWindow));
  }
  const bool selections = p.selected_tokens > 0 && p.selections.size() == p.counts.size();
  if (selections) w.set("strata.profile.selected_tokens", GgufValue::u64(p.selected_tokens));
  for (size_t l = 0; l < p.counts.size(); ++l)
    w.add_tensor(fmt::format("blk.{}.ffn_act_count", l), DType::I32,
                 {static_cast<int64_t>(p.counts[l].size())});
  for (size_t l = 0; selections && l < p.counts.size(); ++l)
    w.add_tensor(fmt::format("blk.{}.ffn_selected", l), DType::I8,
                 {static_cast<int64_t>(p.selections[l].size())});
  for (const auto& layer : p.counts) {
    std::vector<uint8_t> bytes(layer.size() * 4);
    std::memcpy(bytes.data(), layer.data(), bytes.size());
    w.write_tensor_data(bytes);
  }
  for (size_t l = 0; selections && l < p.counts.size(); ++l) w.write_tensor_data(p.selections[l]);
  w.finish();
}

NeuronProfile read_profile(const std::string& path, const std::string& expected_hash) {
  const auto f = GgufFile::open(path, LoadMode::Read);
  if (f->get_string("general.architecture", "") != kProfileArch)
    fail("'{}' is not a strata activation profile", path);
  NeuronProfile p;
  p.model_hash = f->get_string("strata.profile.model_hash", "");
  p.model_file = f->get_string("strata.profile.model_file", "").substr(0, 256);
  p.text = f->get_string("strata.profile.text", "");
  p.ffn_mode = f->get_string("strata.profile.ffn_mode", "dense");
  if (p.ffn_mode != "dense" && p.ffn_mode != "predict")
    fail("'{}': strata.profile.ffn_mode is '{}'; expected dense or predict", path,
         p.ffn_mode.substr(0, 32));
  // Every number below reaches the placement solver: each is range-checked here, so that a
  // damaged or edited sidecar is a one-line error, never a NaN in the ILP (GLPK aborts on one).
  const int64_t tokens = f->get_int("strata.profile.tokens");
  if (tokens <= 0)
    fail("'{}': strata.profile.tokens is {}; a profile counts at least one token", path, tokens);
  p.tokens = static_cast<uint64_t>(tokens);
  if (!expected_hash.empty() && p.model_hash != expected_hash)
    fail(
        "'{}' profiles {} (hash {}), not the model given (hash {}); profile the model you run "
        "(after train-predictors, the file it wrote; for a bundle, the file it was bundled "
        "from): strata profile -m MODEL -f TEXT -o {}",
        path, p.model_file.empty() ? "another model" : "'" + p.model_file + "'",
        p.model_hash.substr(0, 64), expected_hash, path);
  const int64_t layers = f->get_int("strata.profile.layer_count");
  if (layers <= 0 || layers > static_cast<int64_t>(f->tensors().size()))
    fail("'{}': strata.profile.layer_count {} does not match its {} tensors", path, layers,
         f->tensors().size());
  for (int64_t l = 0; l < layers; ++l) {
    const std::string name = fmt::format("blk.{}.ffn_act_count", l);
    const GgufTensorInfo* t = f->find_tensor(name);
    if (t == nullptr || t->type != DType::I32 || t->dims.size() != 1)
      fail("'{}' lacks a valid tensor '{}'", path, name);
    std::vector<uint32_t> counts(static_cast<size_t>(t->dims[0]));
    std::memcpy(counts.data(), t->data, counts.size() * 4);
    for (size_t i = 0; i < counts.size(); ++i)
      if (counts[i] > p.tokens)
        fail("'{}': neuron {} of layer {} fired {} times in {} tokens", path, i, l, counts[i],
             p.tokens);
    p.counts.push_back(std::move(counts));
  }
  // The selections (optional): each layer's rows of its neurons' bits, nothing past n_ff set.
  p.selected_tokens = static_cast<uint64_t>(f->get_int("strata.profile.selected_tokens", 0));
  if (p.selected_tokens > std::min(p.tokens, kSelectedTokens))
    fail("'{}': strata.profile.selected_tokens is {} of {} tokens (at most {})", path,
         p.selected_tokens, p.tokens, kSelectedTokens);
  for (int64_t l = 0; p.selected_tokens > 0 && l < layers; ++l) {
    const std::string name = fmt::format("blk.{}.ffn_selected", l);
    const GgufTensorInfo* t = f->find_tensor(name);
    const size_t n = p.counts[static_cast<size_t>(l)].size(), row = (n + 7) / 8;
    if (t == nullptr || t->type != DType::I8 || t->dims.size() != 1 ||
        static_cast<uint64_t>(t->dims[0]) != row * p.selected_tokens)
      fail("'{}' lacks a valid tensor '{}' ({} tokens of {} bytes)", path, name, p.selected_tokens,
           row);
    std::vector<uint8_t> bits(static_cast<size_t>(t->dims[0]));
    std::memcpy(bits.data(), t->data, bits.size());
    if (n % 8 != 0)
      for (size_t k = row - 1; k < bits.size(); k += row)
        if ((bits[k] >> (n % 8)) != 0)
          fail("'{}': '{}' selects neurons past the layer's {}", path, name, n);
    p.selections.push_back(std::move(bits));
  }
  if (const GgufValue* reuse = f->find("strata.profile.window_reuse")) {
    if (reuse->items.size() != p.counts.size())
      fail("'{}': strata.profile.window_reuse has {} values for {} layers", path,
           reuse->items.size(), p.counts.size());
    for (const auto& v : reuse->items) {
      const double r = v.as_float("strata.profile.window_reuse");
      if (!(r >= 0.0 && r <= 1.0))  // NaN fails too
        fail("'{}': strata.profile.window_reuse of layer {} is {}; a share must be in 0..1", path,
             p.window_reuse.size(), r);
      p.window_reuse.push_back(r);
    }
  }
  return p;
}

std::string profile_report_html(const NeuronProfile& p, const std::string& model_name) {
  constexpr int W = 640, H = 420, L = 60, T = 20, PW = 540, PH = 340;
  std::string svg;
  svg += fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)",
      W, H);
  svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)", L,
                     T, PW, PH);
  for (int g = 0; g <= 10; g += 2) {
    const double x = L + PW * g / 10.0, y = T + PH - PH * g / 10.0;
    svg += fmt::format(R"(<text x="{:.0f}" y="{}" text-anchor="middle">{}%</text>)", x, T + PH + 16,
                       g * 10);
    svg += fmt::format(R"(<text x="{}" y="{:.0f}" text-anchor="end">{}%</text>)", L - 6, y + 4,
                       g * 10);
    svg += fmt::format(R"(<line x1="{}" y1="{:.0f}" x2="{}" y2="{:.0f}" stroke="#eee"/>)", L, y,
                       L + PW, y);
  }
  svg += fmt::format(
      R"(<text x="{}" y="{}" text-anchor="middle">hottest neurons (share of the layer)</text>)",
      L + PW / 2, H - 6);
  svg += fmt::format(
      R"x(<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">activations covered</text>)x",
      T + PH / 2, T + PH / 2);
  std::string rows;
  const size_t n = p.counts.size();
  for (size_t l = 0; l < n; ++l) {
    const LayerProfileSummary s = summarize_layer(p.counts[l], p.tokens);
    const int hue = static_cast<int>(300.0 * l / std::max<size_t>(1, n - 1));
    std::string points;
    for (size_t i = 0; i < s.curve.size(); ++i)
      points += fmt::format("{:.1f},{:.1f} ", L + PW * i / 100.0, T + PH - PH * s.curve[i]);
    svg += fmt::format(
        R"x(<polyline points="{}" fill="none" stroke="hsl({},70%,45%)" stroke-width="1.5"><title>layer {}</title></polyline>)x",
        points, hue, l);
    rows += fmt::format(
        R"x(<tr><td style="color:hsl({},70%,45%)">&#9632; {}</td><td>{:.3f}</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{:.1f}%</td><td>{}</td></tr>)x",
        hue, l, s.sparsity, 100 * s.neurons_for_50, 100 * s.neurons_for_80, 100 * s.neurons_for_95,
        l < p.window_reuse.size() ? fmt::format("{:.1f}%", 100 * p.window_reuse[l]) : "-");
  }
  svg += "</svg>";
  return fmt::format(
      R"(<!doctype html><html><head><meta charset="utf-8"><title>strata profile: {0}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:right}}</style></head><body>
<h1>Activation profile</h1><p>Model <code>{0}</code> (hash {1}), {2} tokens of <code>{3}</code>.
A curve that rises steeply means a few hot neurons fire for most tokens (a power law).</p>
{4}
<table><tr><th>layer</th><th>sparsity</th><th>neurons for 50%</th><th>80%</th><th>95% of activations</th><th>active in the last {6} tokens</th></tr>{5}</table>
</body></html>
)",
      model_name, p.model_hash, p.tokens, p.text, svg, rows, kReuseWindow);
}

}  // namespace strata
