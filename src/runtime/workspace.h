// A session's scratch on the backend's device: one row per token of a batch for every
// intermediate of a layer, in one allocation. bytes() walks the same list the constructor
// allocates from, so the placement inventory counts exactly what is allocated.
#pragma once

#include <cstdint>

#include "backends/backend.h"
#include "model/config.h"
#include "runtime/ffn_mode.h"

namespace strata {

struct WorkspaceShape {
  int64_t batch = 0, n_embd = 0, n_ff = 0, q_dim = 0, kv_dim = 0, n_head = 0, n_rot = 0;
  int64_t rope_tables = 1;  // 2: the windowed layers rotate with their own (Gemma 3)
  int64_t n_ctx = 0, predictor_rank = 0;  // largest predictor rank (predict mode)
  bool sparse = false, bundled = false;
  bool parallel = false;  // a parallel residual: attention's output waits beside the FFN's
  int64_t n_expert = 0, n_expert_used = 0;  // a mixture of experts
  bool shared_expert = false;               // beside the routed ones (Qwen2-MoE)
  bool input_columns = false;  // input-sparse products (runtime/column_products.h)
  // Attention's scratch for scores ([batch][n_head][n_ctx]): the devices keep them there; the
  // CPU's attention keeps them in registers (backends/cpu/attention.h) and needs none.
  bool attention_scores = true;
  static WorkspaceShape of(const ModelConfig& c, int64_t n_ctx, int64_t batch, FfnMode mode,
                           bool bundled, int64_t predictor_rank, bool input_columns = false);
};

class Workspace {
 public:
  Workspace(Backend& backend, const WorkspaceShape& shape);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  static uint64_t bytes(const WorkspaceShape& shape);

  // [batch][width] each; null where the mode does not use them.
  float *x = nullptr, *xn = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr;
  float *proj = nullptr, *gate = nullptr, *up = nullptr;
  float* attn_out = nullptr;                       // a parallel residual's attention output
  float* scores = nullptr;                         // [batch][n_head][n_ctx] or none
  // [tables][batch][n_rot / 2]: a batch of n tokens has its windowed layers' table n rows in.
  float *rope_cos = nullptr, *rope_sin = nullptr;
  // Sparse FFN: compact values [batch][ids] (stride n_ff), per-token selection [batch][n_ff].
  float *gate_c = nullptr, *up_c = nullptr, *h_c = nullptr;
  float *pred_hidden = nullptr, *pred_scores = nullptr;
  float* pass_out = nullptr;  // flash tier: a later pass's down projection
  uint8_t *mask = nullptr, *need = nullptr;
  int32_t* ids = nullptr;  // [n_ff]
  // A mixture of experts: the router's logits [batch][n_expert], each token's expert weights
  // [batch][n_expert_used] and expert outputs [batch][n_expert_used][n_embd] (in the order of
  // its choice), one expert's tokens' inputs and outputs [batch][n_embd].
  // With a shared expert its gate's logits [batch], and one more slot per token (the last).
  float *router = nullptr, *mix_weights = nullptr, *expert_out = nullptr;
  float* shared_gate = nullptr;
  float *expert_in = nullptr, *expert_y = nullptr;
  // A mixture in a sparse mode: each token's weight of every expert [batch][n_expert] (0: not
  // chosen), which masks and weighs the neurons (Backend::mask_unchosen, scale_by_expert).
  float* expert_weights = nullptr;
  // Input-sparse products: an input's non-zero values [batch][width] (mask), the union of their
  // columns [width] (col_ids), which token needs each [batch][width] (col_need) and their values
  // compacted [batch][width] (col_values); width up to the widest input.
  uint8_t *col_mask = nullptr, *col_need = nullptr;
  int32_t* col_ids = nullptr;
  float* col_values = nullptr;
  // A fused column copy's products [batch][q_dim + 2 kv_dim, or 2 n_ff], before they are split
  // into q/k/v or gate/up (LayerColumns).
  float* col_fused = nullptr;

 private:
  Backend& backend_;
  Buffer buffer_;
};

}  // namespace strata
