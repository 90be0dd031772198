// From what a run asks for (mode, context, budgets, a profile, a saved plan) to the options of
// its sessions, through one placement plan: the inventory is taken, a solver (or a plan file)
// decides where everything lives, the plan's budgets are checked, and the model is prepared for
// it (ffn_down_t built where a sparse mode needs it, weight layouts the backend prefers). The
// one place where a run's placement is decided; the CLI parses flags and prints the result.
#pragma once

#include <optional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "backends/accelerator.h"
#include "model/model.h"
#include "placement/plan.h"
#include "placement/solver.h"
#include "planning/device_choice.h"
#include "planning/model_inventory.h"
#include "runtime/session.h"

namespace strata {

enum class SolverChoice { Auto, Greedy, Ilp };

struct RunRequest {
  FfnMode mode = FfnMode::Dense;
  bool check_predictor = false;
  int64_t n_ctx = 0;             // positions per sequence
  int n_seq = 1;                 // sequences held at once (server slots), each with n_ctx positions
  int64_t logits_rows = 1;       // perplexity and logits ask for every token's logits
  int threads = 1;               // the CPU's pool (its threads' scratch is planned)
  int64_t ubatch = 0;            // -ub: tokens per batch (0: prompt_batch's choice)
  uint64_t front_end_bytes = 0;  // RAM the front end holds beside the session (the server's)
  KvTypes kv{};
  Budgets budgets;
  SolverChoice solver = SolverChoice::Auto;
  SolverOptions solver_options;
  CostModel costs;  // flash_neuron_s is filled from `storage` (or a default) when 0
  // --vram-bandwidth was given; otherwise a run on a GPU plans with 85% of its peak (a read
  // kernel reaches about that share: strata bench measures it).
  bool vram_bandwidth_given = false;
  const ActivationCounts* profile = nullptr;
  const nlohmann::json* plan = nullptr;  // a saved plan (strata plan -o) instead of solving
  bool repack = true;                    // CPU backend: interleave Q4_0/Q8_0/Q4_K multiplied whole
  // Flash reads; look-ahead where the session's store reads flash for the CPU (on unless turned
  // off). lookahead_asked: named on the command line (a split run notes that it does not apply).
  FlashReading flash{5, true};
  bool lookahead_asked = false;
  bool allow_vram = false;  // `strata plan`: hybrid plans for a GPU this machine may lack
  // Runs: which device computes (-ngl, --vram-budget, --device; planning/device_choice.h).
  DeviceRequest device;
  // -ctk/-ctv were given; otherwise the KV cache is f16 on a GPU (llama.cpp's default there).
  bool kv_types_given = true;
  // --sparsity-mode and --sparsity (runtime/input_sparsifier.h).
  InputSparsityChoice sparsity{};
  // TEAL on the CPU: decode through the column copies (Model::ensure_input_columns).
  bool input_columns = false;
};

struct PlannedRun {
  SessionOptions session;
  DeviceChoice device;                    // where the sessions compute (make_session_backend)
  std::shared_ptr<Backend> host_backend;  // a split FFN's CPU part (make_session_backend)
  PlacementPlan plan;
  Inventory inventory;
  std::vector<std::string> notes;  // for stderr: what was done to the model
};

// Tokens per batch through the layers (llama.cpp's -ub): `asked` when given; for a
// neuron-bundled model on the CPU alone the largest of kFlashPromptBatch, its half and quarter
// whose buffers beyond a batch of Session::kMaxBatch (`bytes_per_token` each) take at most
// 1/4 of the RAM the budget leaves beyond its minimum (`spare_ram`; nullopt: no budget) -- a
// batch reads the union of its tokens' neurons once, so a prompt in larger batches reads fewer
// bytes per token, but the caches keep most of what they would hold (7B F16 under 7 GiB: 256
// tokens, prompts 1.7x faster; docs/FLASH.md); else Session::kMaxBatch.
inline constexpr int64_t kFlashPromptBatch = 512;
int64_t prompt_batch(int64_t asked, bool neuron_bundled, bool cpu_alone,
                     std::optional<uint64_t> spare_ram, uint64_t bytes_per_token);

// Plans without touching the model (strata plan): inventory, solver or plan file, budgets.
PlannedRun make_plan(const Model& model, const RunRequest& r);
// make_plan, then the model prepared for the plan and the session options that apply it.
PlannedRun plan_run(Model& model, const RunRequest& r);

// The backend the plan's device choice names, over `pool` where it is the CPU. A run with a
// CPU part beside the device (a split FFN's RAM part, layers on the CPU) also gets the CPU
// backend over `pool` (held by the run, named in its session options).
std::unique_ptr<Backend> make_session_backend(PlannedRun& run, ThreadPool& pool,
                                              bool repack = true);

// The accelerator the plan's device choice computes on (the GPU, or the emulated one); null when
// it is the CPU or the reference device.
const AcceleratorProvider* accelerator_of(const DeviceChoice& choice);

// Bytes a session holds on a device for the whole model (weights, KV cache, workspace, logits,
// counters) plus what the backend itself allocates: the device decision's need.
// with_ffn false: without the FFN matrices (what a split FFN needs before any neuron).
uint64_t device_session_bytes(const Model& model, const Inventory& inv, DeviceKind kind,
                              bool with_ffn = true);

// The flash tier's cost of reading one bundle: its share of the disk's throughput at `depth`
// reads in flight (the storage profile), or, without one, bundle_bytes at
// kDefaultFlashBytesPerS. Plans take the depth decode's reads reach (a layer's misses are
// submitted together, up to the ring's 256; the probe measures up to 64).
inline constexpr double kDefaultFlashBytesPerS = 2e9;
inline constexpr int kPlannedReadDepth = 64;
double flash_neuron_seconds(uint64_t bundle_bytes, const StorageProfile* storage, int depth);

}  // namespace strata
