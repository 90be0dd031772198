// strata train-predictors: collect (FFN input, active mask) pairs from a text, train a
// low-rank predictor per layer (rank from a ladder), write the model with predictors,
// thresholds and ffn_down_t, and report per layer.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/cpu/matvec.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/timer.h"
#include "model/flash_route.h"
#include "offline/predictor_training.h"
#include "offline/text_windows.h"

namespace strata {

namespace {

struct TrainOptions {
  std::string model = default_model_path(), file, out, ranks = "16,32,64,128,256,512";
  std::string type = "f16";
  int64_t max_tokens = 16384, ctx = 512;
  int threads = default_threads();
  double recall = 0.99;
  int epochs = 8, search_epochs = 3;
  bool keep_down = false, json = false, verbose = false;
};

void add_train_flags(CLI::App* cmd, TrainOptions& o) {
  cmd->add_option("-m,--model", o.model, "GGUF model file (default: the shipped model)");
  cmd->add_option("-f,--file", o.file, "Training text")->required();
  cmd->add_option("-o,--output", o.out, "Model to write (GGUF)")->required();
  cmd->add_option("-n,--n-tokens", o.max_tokens,
                  "Tokens to collect (80% train, 10% threshold calibration, 10% held out)")
      ->check(in_range(int64_t{64}, int64_t{1} << 32));
  cmd->add_option("-c,--ctx-size", o.ctx, "Window size in tokens")
      ->check(in_range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--ranks", o.ranks, "Rank ladder, comma separated, increasing");
  cmd->add_option("--recall", o.recall, "Recall target on held-out tokens")
      ->check(in_range(0.5, 1.0));
  cmd->add_option("--epochs", o.epochs, "Training epochs of the chosen rank")
      ->check(in_range(1, 1000));
  cmd->add_option("--search-epochs", o.search_epochs,
                  "Training epochs per rank while searching the ladder")
      ->check(in_range(1, 1000));
  cmd->add_option("--predictor-type", o.type, "Predictor weight type: f32, f16, q8_0");
  cmd->add_flag("--keep-down", o.keep_down, "Keep ffn_down as well as ffn_down_t");
  cmd->add_option("-t,--threads", o.threads, "Threads")->check(in_range(1, 1024));
  cmd->add_flag("--json", o.json, "Print the report as JSON");
  cmd->add_flag("-v,--verbose", o.verbose, "Print every rank tried");
}

// "16,32,64": increasing ranks; for quantized predictors only multiples of 32 (Q8_0 blocks).
std::vector<int64_t> rank_ladder(const std::string& text, DType type) {
  std::vector<int64_t> ladder;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    int64_t r = 0;
    try {
      r = std::stoll(item);
    } catch (...) {
      fail("--ranks: '{}' is not a number", item);
    }
    if (r < 1 || r > 65536) fail("--ranks: {} is out of range", r);
    if (needs_q8_input(type) && r % 32 != 0) continue;
    if (!ladder.empty() && r <= ladder.back()) fail("--ranks must increase");
    ladder.push_back(r);
  }
  if (ladder.empty()) fail("--ranks has no usable rank");
  return ladder;
}

std::vector<TrainedPredictor> train_layers(const Model& model, const TrainOptions& o,
                                           const PredictorTrainingOptions& opt, ThreadPool& pool,
                                           int64_t* tokens) {
  const ModelConfig& c = model.config;
  const auto text = tokenize_text_file(model, o.file);
  ProgressBar collect("collect");
  const auto samples = collect_predictor_samples(
      model, text, std::min<int64_t>(o.ctx, c.n_ctx_train), o.max_tokens, pool,
      [&](int64_t d, int64_t t) { collect.update(d, t, "tokens"); });
  collect.finish();
  *tokens = samples[0].count;
  std::vector<TrainedPredictor> trained;
  ProgressBar bar("train");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    bar.update(l, c.n_layer, "layers");
    trained.push_back(train_layer_predictor(samples[l], c.n_embd, c.ffn_neurons(),
                                            ffn_has_gate(c.ffn), opt, pool,
                                            [&](const std::string& line) {
                                              if (o.verbose)
                                                fmt::print(stderr, "\nlayer {}: {}", l, line);
                                            }));
  }
  bar.update(c.n_layer, c.n_layer, "layers");
  bar.finish();
  return trained;
}

void report(const std::vector<TrainedPredictor>& trained, const TrainOptions& o, int64_t tokens,
            double seconds) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < trained.size(); ++l) {
    const auto& t = trained[l];
    layers.push_back({{"layer", l},
                      {"rank", t.rank},
                      {"threshold", t.threshold},
                      {"recall", t.recall},
                      {"precision", t.precision},
                      {"predicted_density", t.predicted_density},
                      {"true_density", t.true_density},
                      {"predictor_cost_percent", 100 * t.predictor_share},
                      {"total_cost_percent", 100 * t.cost_share}});
  }
  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"model", o.model},
                                      {"output", o.out},
                                      {"tokens", tokens},
                                      {"seconds", seconds},
                                      {"layers", layers}}
                           .dump(2));
    return;
  }
  fmt::print("trained on {} tokens in {:.1f} s -> {}\n", tokens, seconds, o.out);
  fmt::print(
      "layer  rank  recall  precision  predicted  true density  predictor cost  FFN cost "
      "(held-out, % of dense FFN)\n");
  for (const auto& l : layers)
    fmt::print("{:>5}  {:>4}  {:.4f}  {:>9.3f}  {:>9.3f}  {:>12.3f}  {:>13.1f}%  {:>7.1f}%\n",
               l["layer"].get<int>(), l["rank"].get<int>(), l["recall"].get<double>(),
               l["precision"].get<double>(), l["predicted_density"].get<double>(),
               l["true_density"].get<double>(), l["predictor_cost_percent"].get<double>(),
               l["total_cost_percent"].get<double>());
}

int run_training(const TrainOptions& o) {
  const auto type = dtype_from_name(o.type);
  if (!type || (*type != DType::F32 && *type != DType::F16 && *type != DType::Q8_0))
    fail("--predictor-type '{}' is not one of f32, f16, q8_0", o.type);
  PredictorTrainingOptions opt;
  opt.recall_target = o.recall;
  opt.epochs = o.epochs;
  opt.search_epochs = o.search_epochs;
  opt.rank_ladder = rank_ladder(o.ranks, *type);
  const auto model = Model::load(o.model);
  if (!ffn_is_relu_family(model->config.ffn))
    fail(
        "'{}' has a {} FFN, whose activations are never exactly zero: predictors need a "
        "ReLU-family model (reglu, drelu, relu); for this one {}",
        o.model, ffn_activation_name(model->config.ffn), flash_route(model->config, false));
  ThreadPool pool(checked_threads(o.threads));
  Timer timer;
  int64_t tokens = 0;
  const auto trained = train_layers(*model, o, opt, pool, &tokens);
  write_model_with_predictors(*model, trained, *type, o.keep_down, o.out);
  report(trained, o, tokens, timer.seconds());
  return 0;
}

}  // namespace

Command add_train_predictors_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train-predictors", "Train per-layer activation predictors and write a model that has them");
  auto o = std::make_shared<TrainOptions>();
  add_train_flags(cmd, *o);
  return {cmd, [o] { return run_training(*o); }};
}

}  // namespace strata
