#include "cli/ffn_flags.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata {

void add_ffn_flags(CLI::App* cmd, FfnFlags& f) {
  cmd->add_option("--ffn", f.mode,
                  "FFN mode: dense, predict (predictors pick the neurons; default when the model "
                  "has them), gate-first (exact; ReLU-family models), auto")
      ->check(CLI::IsMember({"auto", "dense", "predict", "gate-first"}));
  cmd->add_flag("--check-predictor", f.check_predictor,
                "Predict mode: also compute the true activations and report the predictor's "
                "recall and precision (slower)");
}

SessionOptions resolve_ffn_flags(const FfnFlags& f, Model& model) {
  SessionOptions o;
  if (f.mode == "auto")
    o.ffn = model.weights.has_predictors ? FfnMode::Predict : FfnMode::Dense;
  else if (f.mode == "predict")
    o.ffn = FfnMode::Predict;
  else if (f.mode == "gate-first")
    o.ffn = FfnMode::GateFirst;
  else
    o.ffn = FfnMode::Dense;
  o.check_predictor = f.check_predictor;
  if (f.check_predictor && o.ffn != FfnMode::Predict)
    fail("--check-predictor needs --ffn predict (and a model with predictors)");
  if (o.ffn == FfnMode::Predict && !model.weights.has_predictors)
    fail(
        "--ffn predict needs activation predictors, which '{}' lacks (make them with strata "
        "train-predictors, or use --ffn gate-first for an exact sparse FFN)",
        model.file->path());
  if (o.ffn == FfnMode::GateFirst && model.config.ffn == FfnActivation::SwiGLU)
    fail("--ffn gate-first needs a ReLU-family FFN (reglu, drelu, relu); '{}' is swiglu",
         model.file->path());
  if (o.ffn != FfnMode::Dense && !model.weights.has_down_t) {
    const uint64_t bytes = model.ensure_down_t();
    fmt::print(stderr,
               "note: '{}' has no ffn_down_t; transposed ffn_down at load ({:.1f} MiB more "
               "memory{}). strata train-predictors writes files that carry it.\n",
               model.file->path(), bytes / 1048576.0,
               needs_q8_input(model.weights.layers[0].ffn_down.type)
                   ? "; quantized weights were re-quantized along the new rows"
                   : "");
  }
  return o;
}

std::vector<FfnLayerStats> stats_difference(const std::vector<FfnLayerStats>& after,
                                            const std::vector<FfnLayerStats>& before) {
  std::vector<FfnLayerStats> d = after;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i].computed -= before[i].computed;
    d[i].nonzero -= before[i].nonzero;
    d[i].truly_active -= before[i].truly_active;
    d[i].predicted -= before[i].predicted;
    d[i].predicted_and_active -= before[i].predicted_and_active;
  }
  return d;
}

uint64_t bytes_touched_per_token(const Model& model, FfnMode mode,
                                 const std::vector<FfnLayerStats>& stats, double tokens) {
  const ModelWeights& w = model.weights;
  uint64_t total = w.output.bytes() + w.token_embd.row_bytes;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    total += l.attn_q.bytes() + l.attn_k.bytes() + l.attn_v.bytes() + l.attn_output.bytes();
    if (mode == FfnMode::Dense) {
      total += l.ffn_gate.bytes() + l.ffn_up.bytes() +
               (l.ffn_down.data != nullptr ? l.ffn_down.bytes() : l.ffn_down_t.bytes());
      continue;
    }
    const double per_token =
        tokens > 0 ? static_cast<double>(stats[i].computed) / tokens : 0.0;
    uint64_t row = l.ffn_up.row_bytes + l.ffn_down_t.row_bytes;
    if (mode == FfnMode::Predict) {
      row += l.ffn_gate.row_bytes;
      total += l.predictor.fc1.bytes() + l.predictor.fc2.bytes();
    } else {
      total += ffn_has_gate(model.config.ffn) ? l.ffn_gate.bytes() : 0;
    }
    total += static_cast<uint64_t>(per_token * static_cast<double>(row));
  }
  return total;
}

nlohmann::json ffn_report_json(const Model& model, const Session& session) {
  const double total = static_cast<double>(session.ffn_activations_per_layer());
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < session.ffn_stats().size(); ++i) {
    const FfnLayerStats& s = session.ffn_stats()[i];
    nlohmann::json l = {{"layer", i},
                        {"computed_density", total > 0 ? s.computed / total : 0.0},
                        {"nonzero_density", total > 0 ? s.nonzero / total : 0.0}};
    if (session.options().check_predictor) {
      l["true_density"] = total > 0 ? s.truly_active / total : 0.0;
      l["recall"] = s.truly_active ? double(s.predicted_and_active) / s.truly_active : 1.0;
      l["precision"] = s.predicted ? double(s.predicted_and_active) / s.predicted : 1.0;
    }
    if (model.weights.layers[i].predictor.present())
      l["predictor_rank"] = model.weights.layers[i].predictor.rank();
    layers.push_back(l);
  }
  const ForwardTimes& t = session.times();
  return {{"ffn_mode", ffn_mode_name(session.options().ffn)},
          {"layers", layers},
          {"time_s",
           {{"attention", t.attention},
            {"predictor", t.predictor},
            {"ffn", t.ffn},
            {"output", t.output}}}};
}

void print_ffn_report(const Model& model, const Session& session, std::FILE* out) {
  const nlohmann::json j = ffn_report_json(model, session);
  const bool check = session.options().check_predictor;
  fmt::print(out, "FFN mode {}: per layer density computed / non-zero{}\n",
             j["ffn_mode"].get<std::string>(), check ? " / true, predictor recall, precision" : "");
  for (const auto& l : j["layers"]) {
    fmt::print(out, "  layer {:>3}: {:.3f} / {:.3f}", l["layer"].get<int>(),
               l["computed_density"].get<double>(), l["nonzero_density"].get<double>());
    if (check)
      fmt::print(out, " / {:.3f}, recall {:.4f}, precision {:.3f}", l["true_density"].get<double>(),
                 l["recall"].get<double>(), l["precision"].get<double>());
    if (l.contains("predictor_rank")) fmt::print(out, "  (rank {})", l["predictor_rank"].get<int>());
    fmt::print(out, "\n");
  }
  const auto& t = j["time_s"];
  const double sum = t["attention"].get<double>() + t["predictor"].get<double>() +
                     t["ffn"].get<double>() + t["output"].get<double>();
  auto pct = [&](const char* k) { return sum > 0 ? 100 * t[k].get<double>() / sum : 0.0; };
  fmt::print(out, "time: attention {:.1f}%, predictor {:.1f}%, FFN {:.1f}%, output {:.1f}% of {:.3f} s\n",
             pct("attention"), pct("predictor"), pct("ffn"), pct("output"), sum);
}

}  // namespace strata
