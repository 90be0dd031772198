#include "engine/engine.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_limits.h"
#include "core/timer.h"
#include "offline/profile.h"
#include "tiers/bundle_layout.h"

namespace strata {

FfnMode resolve_ffn_mode(std::optional<FfnMode> asked, SparsityMode sparsity, bool has_predictors) {
  if (asked) return *asked;
  // Input sparsity thresholds the dense FFN's inputs.
  if (sparsity != SparsityMode::Off) return FfnMode::Dense;
  return has_predictors ? FfnMode::Predict : FfnMode::Dense;
}

void check_mode_fits_weights(FfnMode mode, const ModelWeights& weights, const std::string& path) {
  if (mode == FfnMode::Dense) return;
  for (const LayerWeights& l : weights.layers)
    if (!l.vec(LayerVector::FfnGateBias).empty())
      fail(
          "'{}' has ffn_gate.bias, which the sparse FFN modes do not apply; run it with --ffn "
          "dense",
          path);
}

namespace {

// The profile's counts, checked against the model (or the file it was bundled from).
ActivationCounts read_counts(const Model& model, const std::string& path) {
  std::string hash = model.file->get_string(kBundleSourceHashKey, "");
  if (model.weights.bundled && hash.empty())
    fail("'{}' does not say which file it was bundled from; bundle it again to use --profile",
         model.file->path());
  if (hash.empty()) hash = model_hash(model);
  NeuronProfile p = read_profile(path, hash);
  return ActivationCounts{p.tokens,
                          std::move(p.counts),
                          std::move(p.window_reuse),
                          p.ffn_mode == "predict" ? FfnMode::Predict : FfnMode::Dense,
                          std::move(p.selections),
                          p.selected_tokens};
}

// A profile counts what one mode reads; a run of another reads other neurons (predict mode
// reads the predictor's selections, several times the neurons that fire on a sparse model).
std::string profile_mode_note(const ActivationCounts& counts, FfnMode run,
                              const std::string& path) {
  const bool predict_run = run == FfnMode::Predict;
  if (predict_run == (counts.mode == FfnMode::Predict)) return {};
  return fmt::format(
      "note: '{}' counts {}; this {} run reads {}, so its plan may misjudge what is read: "
      "profile with strata profile --ffn {}",
      path,
      counts.mode == FfnMode::Predict ? "the predictor's selections"
                                      : "the activations that fire (a dense profile)",
      ffn_mode_name(run), predict_run ? "the predictor's selections" : "the activations that fire",
      predict_run ? "predict" : "dense");
}

}  // namespace

Engine::Engine(EngineOptions options, Notes notes)
    : options_(std::move(options)), notes_(std::move(notes)) {
  Timer timer;
  model_ = Model::load(options_.model_path, options_.require_tokenizer, options_.load);
  if (!options_.lora.empty()) {
    model_->lora = load_lora_adapters(options_.lora, *model_);
    notes_(fmt::format("LoRA: {} adapter{} on {} matrices ({:.1f} MiB)",
                       options_.lora.size(), options_.lora.size() == 1 ? "" : "s",
                       model_->lora.matrices(),
                       static_cast<double>(model_->lora.bytes()) / (1 << 20)));
  }
  load_seconds_ = timer.seconds();
  RunRequest& r = options_.run;
  r.mode = resolve_ffn_mode(options_.ffn_mode, r.sparsity.mode, model_->weights.has_predictors);
  check_mode_fits_weights(r.mode, model_->weights, options_.model_path);
  for (const std::string& note : model_->weights.notes) notes_("note: " + note);
}

Engine::~Engine() = default;

void Engine::read_files() {
  RunRequest& r = options_.run;
  const RunFiles& f = options_.files;
  const Model& model = *model_;
  if (model.weights.bundled || model.weights.column_bundled) {
    const std::string beside = model.file->path() + ".storage.json";
    const std::string file = !f.storage_profile.empty()
                                 ? f.storage_profile
                                 : (is_regular_file(beside) ? beside : std::string());
    if (!file.empty()) {
      storage_ = StorageProfile::from_json_file(file);
      r.flash.storage = &storage_;
      notes_(fmt::format("storage profile: {} ({} points)", file, storage_.points.size()));
    }
  }
  if (!f.profile.empty()) {
    counts_ = read_counts(model, f.profile);
    const std::string note = profile_mode_note(counts_, r.mode, f.profile);
    if (!note.empty()) notes_(note);
    r.profile = &counts_;
  }
  if (!f.plan.empty()) {
    try {
      plan_file_ = std::make_unique<nlohmann::json>(parse_json_bounded(
          read_regular_file(f.plan, kMaxJsonFileBytes, "plan"), fmt::format("plan '{}'", f.plan)));
    } catch (const nlohmann::json::exception& e) {
      fail("plan '{}' is not JSON: {}", f.plan, e.what());
    }
    r.plan = plan_file_.get();
  }
}

void Engine::plan(int64_t n_ctx) {
  if (planned_once_) fail("the engine has planned its run already");
  planned_once_ = true;
  RunRequest& r = options_.run;
  r.n_ctx = n_ctx;
  r.threads = options_.threads;
  read_files();
  if (!r.allow_vram) {  // a run: the budget is its device's, not a hybrid plan's
    r.device.vram_budget = r.budgets.vram;
    r.budgets.vram = 0;
  }
  planned_ = r.allow_vram ? make_plan(*model_, r) : plan_run(*model_, r);
  for (const std::string& note : planned_.notes) notes_(note);
}

const PlannedRun& Engine::plan_only(int64_t n_ctx) {
  plan(n_ctx);
  return planned_;
}

Session& Engine::start(int64_t n_ctx) {
  if (options_.run.allow_vram) fail("a plan for another machine's GPU cannot run here");
  plan(n_ctx);
  const RunRequest& r = options_.run;
  pool_ = std::make_unique<ThreadPool>(options_.threads);
  backend_ = make_session_backend(planned_, *pool_, r.repack);
  session_ = std::make_unique<Session>(*model_, n_ctx, *backend_, planned_.session);
  return *session_;
}

}  // namespace strata
