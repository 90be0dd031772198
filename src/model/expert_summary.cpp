#include "model/expert_summary.h"

#include <string>
#include <string_view>

namespace strata {

namespace {

// "blk.N.<rest>" -> rest; empty for other names.
std::string_view layer_rest(std::string_view name) {
  if (!name.starts_with("blk.")) return {};
  const size_t dot = name.find('.', 4);
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

// ffn_gate_exps.weight (stacked) or ffn_up.3.weight (one tensor per expert).
bool is_expert_tensor(std::string_view rest, bool& stacked) {
  for (std::string_view kind : {"ffn_gate", "ffn_up", "ffn_down"}) {
    if (!rest.starts_with(kind)) continue;
    std::string_view tail = rest.substr(kind.size());
    if (tail == "_exps.weight") return stacked = true;
    if (!tail.starts_with('.') || !tail.ends_with(".weight")) continue;
    tail = tail.substr(1, tail.size() - 8);
    if (tail.empty()) continue;
    bool digits = true;
    for (char c : tail) digits &= c >= '0' && c <= '9';
    if (digits) return true;
  }
  return false;
}

}  // namespace

ExpertSummary summarize_experts(const GgufFile& f) {
  ExpertSummary s;
  const std::string a = f.get_string("general.architecture", "") + ".";
  s.n_expert = f.get_int(a + "expert_count", 0);
  s.n_expert_used = f.get_int(a + "expert_used_count", 0);
  if (s.n_expert <= 0) return ExpertSummary{};
  for (const auto& t : f.tensors()) {
    const std::string_view rest = layer_rest(t.name);
    if (rest == "ffn_gate_inp.weight") {
      s.router_bytes += t.n_bytes;
      ++s.moe_layers;
    } else if (is_expert_tensor(rest, s.stacked)) {
      s.expert_bytes += t.n_bytes;
    } else if (rest.starts_with("ffn_") && rest.ends_with("_shexp.weight")) {
      s.shared_bytes += t.n_bytes;
    }
  }
  return s;
}

}  // namespace strata
