// A model brought up to run: the one object every command that runs a model (run, bench,
// perplexity, logits, chat, batched) and the server open. It loads the model file, reads the
// files the run names (a profile, a saved plan, a storage profile), plans the run (one
// placement plan: planning/planned_session.h), and makes the thread pool, the backends and the
// session. Its options are parsed once from the flags (cli/ffn_flags.h) and never copied field by
// field: the run's request (budgets, FFN mode, KV types, flash reads, input sparsity, devices)
// is planning's RunRequest itself.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "planning/model_inventory.h"
#include "planning/planned_session.h"
#include "runtime/session.h"
#include "tiers/storage_profile.h"

namespace strata {

// Files a run reads beside the model; empty: none. The storage profile defaults to
// MODEL.storage.json beside a bundled model when it exists.
struct RunFiles {
  std::string profile;          // strata profile output: activation counts for the solver
  std::string plan;             // strata plan -o output, run instead of solving
  std::string storage_profile;  // strata probe-storage output: the disk's measured behaviour
};

struct EngineOptions {
  std::string model_path;
  LoadMode load = LoadMode::Read;
  bool require_tokenizer = true;
  int threads = 1;
  // The FFN mode asked for; none (--ffn auto): predict when the model has predictors, dense
  // otherwise and whenever input sparsity is on.
  std::optional<FfnMode> ffn_mode;
  // What the run asks of planning; its mode and n_ctx are set when the engine starts.
  RunRequest run;
  RunFiles files;
  std::vector<LoraFile> lora;  // adapters applied to the model (model/lora_adapter.h)
};

// The mode --ffn auto (none) resolves to for a model with or without predictors.
FfnMode resolve_ffn_mode(std::optional<FfnMode> asked, SparsityMode sparsity, bool has_predictors);
// Fails where the run's FFN mode cannot compute the model's FFN as the file says: the sparse
// modes select neurons by a gate without its bias, so a gated FFN with ffn_gate.bias (llama.cpp's
// optional MLP biases) runs dense only.
void check_mode_fits_weights(FfnMode mode, const ModelWeights& weights, const std::string& path);

class Engine {
 public:
  // Where planning's notes go (what was done to the model, why a device was not used): the CLI
  // prints them on stderr as they come.
  using Notes = std::function<void(const std::string&)>;

  // Loads the model (a one-line error when the file cannot be used).
  Engine(EngineOptions options, Notes notes);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  double load_seconds() const { return load_seconds_; }
  const EngineOptions& options() const { return options_; }

  // The run's request, which a command may adjust once the model is known, before start().
  RunRequest& request() { return options_.run; }

  // Plans the run for n_ctx positions per sequence (the request's sequences, logits rows and
  // front-end bytes as given), prepares the model for the plan, and opens the session.
  Session& start(int64_t n_ctx);
  // strata plan: the plan alone (the request's allow_vram: hybrid plans for a GPU this machine
  // may lack), the model untouched.
  const PlannedRun& plan_only(int64_t n_ctx);

  // After start().
  Session& session() { return *session_; }
  const Session& session() const { return *session_; }
  const PlannedRun& planned() const { return planned_; }
  ThreadPool& pool() { return *pool_; }
  Backend& backend() { return *backend_; }
  const StorageProfile& storage() const { return storage_; }

 private:
  void read_files();
  void plan(int64_t n_ctx);

  EngineOptions options_;
  Notes notes_;
  std::unique_ptr<Model> model_;
  double load_seconds_ = 0;
  bool planned_once_ = false;
  StorageProfile storage_;
  ActivationCounts counts_;
  std::unique_ptr<nlohmann::json> plan_file_;
  PlannedRun planned_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Session> session_;
};

}  // namespace strata
