// Which device a run computes on: the decision from what was asked (-ngl, --vram-budget,
// --device); when the whole model does not fit but its dense blocks do, a predict-mode run
// splits its FFN (the plan puts the hottest neurons on the device, PowerInfer's hybrid) and what
// exists (a GPU, its free memory, what the whole model needs there), as a pure function with its
// tests (tests/test_device_choice.cpp). The whole model goes to the GPU or none of it: a run that
// asked for a GPU and cannot have one gets the CPU and a one-line note saying why, except where
// running elsewhere would defy what was asked (-ngl of every layer that does not fit), which is an
// error before any work.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

enum class DeviceKind {
  Cpu,
  Cuda,       // the CUDA backend
  Reference,  // the reference device (tests, and the hidden --device reference)
};

const char* device_kind_name(DeviceKind kind);

struct DeviceRequest {
  // --device: "" (decided from the rest), "cpu", "cuda", "reference", "cuda-emu" (the CUDA
  // backend on the emulated GPU: backends/cuda/emu, for tests; slow)
  std::string device;
  // -ngl, as llama.cpp counts: 0 none; N <= the layer count: the last N layers (the output head
  // stays on the CPU); more: the whole model.
  int gpu_layers = 0;
  uint64_t vram_budget = 0;  // --vram-budget; 0: none given
  bool wants_gpu() const {
    return device == "cuda" || device == "cuda-emu" || device == "reference" || gpu_layers > 0 ||
           (device.empty() && vram_budget > 0);
  }
};

// What exists, measured by the caller.
struct DeviceFacts {
  bool gpu_present = false;
  std::string no_gpu_reason;        // when not present
  uint64_t gpu_free_bytes = 0;      // what the GPU can give (0 for the reference device: no limit)
  double gpu_peak_bytes_per_s = 0;  // its memory's peak (clock and bus), 0 when unknown
  int64_t n_layer = 0;
  uint64_t needed_bytes = 0;  // the whole model on the device: weights, KV cache, buffers
  // The flash tier: the FFN is always split (VRAM, the RAM cache, flash), never whole on a
  // device or placed by layers.
  bool bundled = false;
  // A split FFN (hot neurons on the device, the rest in RAM or on flash) can run: predict mode,
  // or a dense mixture split by whole experts (`splits_experts`).
  bool can_split = false;
  bool splits_experts = false;
  uint64_t dense_bytes = 0;      // every dense block on the device, before any neuron
  uint64_t min_split_bytes = 0;  // the least a split needs: the buffers and one layer's blocks
};

struct DeviceChoice {
  DeviceKind kind = DeviceKind::Cpu;
  uint64_t budget = 0;  // the device's memory budget when not the CPU (0: no limit)
  bool split = false;   // the FFN split between the device and RAM by the placement plan
  std::string note;     // for stderr, when the choice is not what a reader would assume
  // -ngl of some layers: the last ones on the device, the rest and the output head on the CPU;
  // 0: as the rest of the choice says.
  int64_t gpu_layers = 0;
  bool emulated = false;  // kind Cuda on the emulated GPU (--device cuda-emu)
};

// Fails with a one-line message when what was asked cannot be honoured at all.
DeviceChoice choose_device(const DeviceRequest& request, const DeviceFacts& facts);

}  // namespace strata
