#include "planning/device_choice.h"

#include <fmt/format.h>

#include "core/error.h"
#include "placement/plan.h"

namespace strata {

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Cpu:
      return "cpu";
    case DeviceKind::Cuda:
      return "cuda";
    case DeviceKind::Reference:
      return "reference";
  }
  return "?";
}

namespace {

std::string gib(uint64_t bytes) {
  return size_text(static_cast<double>(bytes));
}

}  // namespace

namespace {

DeviceChoice choose(const DeviceRequest& r, const DeviceFacts& f) {
  if (!r.device.empty() && r.device != "cpu" && r.device != "cuda" && r.device != "reference" &&
      r.device != "cuda-emu")
    fail("--device '{}' is not one of cpu, cuda", r.device);
  const bool cuda_named = r.device == "cuda" || r.device == "cuda-emu";
  if (r.gpu_layers < 0) fail("--n-gpu-layers {} is negative", r.gpu_layers);
  if (r.device == "cpu" || !r.wants_gpu()) return {};
  if (f.bundled && !f.can_split)
    return {DeviceKind::Cpu, 0, false,
            "note: a bundled model uses a GPU for its hottest neurons in predict mode only; "
            "running on the CPU"};
  const bool reference = r.device == "reference";
  if (cuda_named && !f.gpu_present) fail("--device {}: {}", r.device, f.no_gpu_reason);
  if (!reference && !f.gpu_present)
    return {DeviceKind::Cpu, 0, false,
            fmt::format("note: {}; running on the CPU", f.no_gpu_reason)};
  // The device's budget: --vram-budget, within what the GPU has free.
  uint64_t budget = r.vram_budget;
  if (!reference) {
    if (budget > f.gpu_free_bytes)
      fail("--vram-budget {} is more than the {} the GPU has free", gib(budget),
           gib(f.gpu_free_bytes));
    if (budget == 0) budget = f.gpu_free_bytes;
  }
  const DeviceKind kind = reference ? DeviceKind::Reference : DeviceKind::Cuda;
  // Some layers by -ngl: the planner checks that they fit (it knows each layer's bytes).
  if (r.gpu_layers > 0 && r.gpu_layers <= f.n_layer) {
    if (f.bundled)
      fail(
          "-ngl {}: a bundled model's FFN is placed neuron by neuron, not by layers; give "
          "--vram-budget (or -ngl 99 for as much as the GPU holds)",
          r.gpu_layers);
    return {kind, budget, false, "", r.gpu_layers};
  }
  // A bundled model's FFN is always a split (VRAM, RAM cache, flash), even when all of it fits.
  if (f.bundled && (budget == 0 || f.needed_bytes <= budget))
    return {kind, budget > 0 ? budget : f.needed_bytes, true, ""};
  if (budget == 0 || f.needed_bytes <= budget) return {kind, budget, false, ""};
  if (f.can_split && f.min_split_bytes < budget)
    return {kind, budget, true,
            fmt::format("note: the whole model needs {} on the GPU, more than its {} budget: the "
                        "{} go there, the rest is computed from {}",
                        gib(f.needed_bytes), gib(budget),
                        f.splits_experts ? "dense blocks and the most chosen experts"
                                         : "hottest FFN neurons",
                        f.bundled ? "RAM and flash" : "RAM")};
  const std::string need = fmt::format(
      "the whole model needs {} on the GPU (weights, KV cache, buffers), more than the {} {}",
      gib(f.needed_bytes), gib(budget), r.vram_budget > 0 ? "of --vram-budget" : "it has free");
  if (f.can_split)
    fail(
        "{}, and even one layer's dense blocks with the buffers need {}; lower -c, or use a "
        "smaller model or type",
        need, gib(f.min_split_bytes));
  if (r.gpu_layers > 0 || cuda_named || reference)
    fail("{}; lower -c, or use a smaller model or type", need);
  return {DeviceKind::Cpu, 0, false, fmt::format("note: {}; running on the CPU", need)};
}

}  // namespace

DeviceChoice choose_device(const DeviceRequest& r, const DeviceFacts& f) {
  DeviceChoice c = choose(r, f);
  c.emulated = c.kind == DeviceKind::Cuda && r.device == "cuda-emu";
  return c;
}

}  // namespace strata
