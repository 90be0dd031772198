// What a GGUF file's mixture-of-experts layers hold, from its metadata and tensor names alone
// (no model is loaded: `strata info` reads any file): the expert counts, the bytes of the
// routers and of the experts, and the expert bytes one token reads (its top k of each layer;
// shared experts apart, which it reads whole).
#pragma once

#include <cstdint>

#include "format/gguf.h"

namespace strata {

struct ExpertSummary {
  int64_t n_expert = 0;       // <arch>.expert_count; 0: no mixture
  int64_t n_expert_used = 0;  // <arch>.expert_used_count
  int64_t moe_layers = 0;     // layers with a router (ffn_gate_inp)
  bool stacked = false;       // 3-D ffn_*_exps tensors (else one tensor per expert)
  uint64_t router_bytes = 0, expert_bytes = 0;
  uint64_t shared_bytes = 0;  // shared experts and their gates (*_shexp, Qwen2-MoE): every token
  uint64_t active_expert_bytes() const {  // a token's share: n_expert_used of n_expert
    return n_expert > 0 ? expert_bytes / static_cast<uint64_t>(n_expert) *
                              static_cast<uint64_t>(n_expert_used)
                        : 0;
  }
};

ExpertSummary summarize_experts(const GgufFile& f);

}  // namespace strata
