#include "runtime/workspace.h"

#include <algorithm>
#include <new>

#include "core/error.h"

namespace strata {

WorkspaceShape WorkspaceShape::of(const ModelConfig& c, int64_t n_ctx, int64_t batch, FfnMode mode,
                                  bool bundled, int64_t predictor_rank, bool input_columns) {
  WorkspaceShape s;
  s.batch = batch;
  s.n_embd = c.n_embd;
  // The sparse modes see a mixture as one FFN of every expert's neurons; the dense mixture
  // computes one expert (n_ff neurons, a shared expert's n_ff_shared, a leading dense layer's
  // n_ff_dense) at a time.
  const int64_t lead_ff = c.moe() && c.n_dense_lead > 0 ? c.n_ff_dense : 0;
  s.n_ff = mode != FfnMode::Dense ? c.ffn_neurons() : std::max({c.n_ff, c.n_ff_shared, lead_ff});
  s.q_dim = c.n_head * c.head_dim;
  s.kv_dim = c.n_head_kv * c.head_dim;
  s.n_head = c.n_head;
  s.n_rot = c.n_rot;
  s.rope_tables = c.swa_rope_differs() ? 2 : 1;
  s.n_ctx = n_ctx;
  s.predictor_rank = mode == FfnMode::Predict ? predictor_rank : 0;
  s.sparse = mode != FfnMode::Dense;
  s.bundled = bundled;
  s.parallel = c.arch->residual == ResidualKind::Parallel;
  s.n_expert = c.n_expert;
  s.n_expert_used = c.n_expert_used;
  s.shared_expert = c.n_ff_shared > 0 || lead_ff > 0;
  s.input_columns = input_columns;
  return s;
}

namespace {

// Calls place(bytes, set) for every buffer of the shape, in allocation order; set(p) points
// the buffer's member of the workspace at p (not called when only sizes are wanted).
template <typename Place>
void each_buffer(const WorkspaceShape& s, Workspace* w, Place&& place) {
  const int64_t B = s.batch;
  auto f = [&](float* Workspace::*m, int64_t count) {
    place(count * 4, [w, m](uint8_t* p) { w->*m = reinterpret_cast<float*>(p); });
  };
  auto u8 = [&](uint8_t* Workspace::*m, int64_t count) {
    place(count, [w, m](uint8_t* p) { w->*m = p; });
  };
  f(&Workspace::x, B * s.n_embd);
  f(&Workspace::xn, B * s.n_embd);
  f(&Workspace::q, B * s.q_dim);
  f(&Workspace::k, B * s.kv_dim);
  f(&Workspace::v, B * s.kv_dim);
  f(&Workspace::attn, B * s.q_dim);
  f(&Workspace::proj, B * s.n_embd);
  if (s.parallel) f(&Workspace::attn_out, B * s.n_embd);
  f(&Workspace::gate, B * s.n_ff);
  f(&Workspace::up, B * s.n_ff);
  if (s.attention_scores) f(&Workspace::scores, B * s.n_head * s.n_ctx);
  f(&Workspace::rope_cos, s.rope_tables * B * s.n_rot / 2);
  f(&Workspace::rope_sin, s.rope_tables * B * s.n_rot / 2);
  if (s.sparse) {
    f(&Workspace::gate_c, B * s.n_ff);
    f(&Workspace::up_c, B * s.n_ff);
    f(&Workspace::h_c, B * s.n_ff);
    u8(&Workspace::mask, B * s.n_ff);
    u8(&Workspace::need, B * s.n_ff);
    place(s.n_ff * 4, [w](uint8_t* p) { w->ids = reinterpret_cast<int32_t*>(p); });
  }
  if (s.predictor_rank > 0) {
    f(&Workspace::pred_hidden, B * s.predictor_rank);
    f(&Workspace::pred_scores, B * s.n_ff);
  }
  if (s.bundled) f(&Workspace::pass_out, B * s.n_embd);
  if (s.input_columns) {
    const int64_t widest = std::max({s.n_embd, s.q_dim, s.n_ff});
    u8(&Workspace::col_mask, B * widest);
    u8(&Workspace::col_need, B * widest);
    place(widest * 4, [w](uint8_t* p) { w->col_ids = reinterpret_cast<int32_t*>(p); });
    f(&Workspace::col_values, B * widest);
    f(&Workspace::col_fused, B * std::max(s.q_dim + 2 * s.kv_dim, 2 * s.n_ff));
  }
  if (s.n_expert > 0 && s.sparse) {
    f(&Workspace::router, B * s.n_expert);
    f(&Workspace::expert_weights, B * s.n_expert);
  } else if (s.n_expert > 0) {
    // Each token's mixture slots: its k experts' outputs, then the shared expert's.
    const int64_t slots = s.n_expert_used + (s.shared_expert ? 1 : 0);
    f(&Workspace::router, B * s.n_expert);
    if (s.shared_expert) f(&Workspace::shared_gate, B);
    f(&Workspace::mix_weights, B * slots);
    f(&Workspace::expert_out, B * slots * s.n_embd);
    f(&Workspace::expert_in, B * s.n_embd);
    f(&Workspace::expert_y, B * s.n_embd);
  }
}

constexpr uint64_t kAlign = 64;  // each buffer on its own cache lines

uint64_t aligned(int64_t bytes) {
  return (static_cast<uint64_t>(bytes) + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

uint64_t Workspace::bytes(const WorkspaceShape& shape) {
  uint64_t total = 0;
  each_buffer(shape, nullptr, [&](int64_t bytes, auto&&) { total += aligned(bytes); });
  return total;
}

Workspace::Workspace(Backend& backend, const WorkspaceShape& shape) : backend_(backend) {
  try {
    buffer_ = backend.allocate(bytes(shape));
  } catch (const std::bad_alloc&) {
    fail("cannot allocate {:.1f} MB of buffers for a context of {} tokens; lower -c",
         static_cast<double>(bytes(shape)) / 1e6, shape.n_ctx);
  }
  uint64_t at = 0;
  each_buffer(shape, this, [&](int64_t bytes, auto&& set) {
    set(buffer_.data + at);
    at += aligned(bytes);
  });
}

Workspace::~Workspace() {
  backend_.release(buffer_);
}

}  // namespace strata
