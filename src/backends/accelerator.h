// An accelerator (today an NVIDIA GPU through the CUDA backend, or that backend on the emulated
// GPU) as the layers above the backends see it: whether one can be used and why not, its memory
// and peak bandwidth, its backend made within a budget, the bytes that backend holds for itself,
// its read-bandwidth probe, and which weight types its kernels read. A weight type it declines
// keeps that layer on the CPU (planning/device_plan.cpp). The CUDA backend defines its two
// providers (backends/cuda/cuda_accelerators.cpp); the registry finds them by name, so nothing
// outside backends/cuda/ includes its headers (scripts/check_layers.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "tensor/dtype.h"

namespace strata {

struct AcceleratorInfo {
  std::string name;  // "NVIDIA H200"
  uint64_t total_bytes = 0, free_bytes = 0;
  double peak_bytes_per_s = 0;  // from the memory clock and bus width; 0 when unknown
};

struct AcceleratorOptions {
  int device = 0;
  uint64_t budget = 0;  // bytes its backend may hold; 0: what the device has free at creation
};

class AcceleratorProvider {
 public:
  virtual ~AcceleratorProvider() = default;
  virtual const char* name() const = 0;  // the registry's: "cuda", "cuda-emu"
  // Devices this build can use on this machine (0 without the backend, a driver or a device),
  // and why there are none, for a one-line note.
  virtual int device_count() const = 0;
  virtual std::string unavailable_reason() const = 0;
  // Fails with a one-line message when the device cannot be used.
  virtual AcceleratorInfo info(int device) const = 0;
  // Fails with a one-line message (no device, a budget above what is free, ...).
  virtual std::unique_ptr<Backend> make(const AcceleratorOptions& options) const = 0;
  // Bytes its backend allocates for itself when made: the placement inventory counts them.
  virtual uint64_t overhead_bytes() const = 0;
  // The read bandwidth of `backend`'s memory by a kernel that only reads (strata bench's limit);
  // fails when `backend` is not this provider's.
  virtual double read_bandwidth(Backend& backend) const = 0;
  // Whether its kernels read weights of this type; a layer holding a type it declines is
  // computed on the CPU.
  virtual bool reads_weights(DType type) const = 0;
  // Whether its backend computes `op` (Backend::supports); a layer needing one it lacks is
  // computed on the CPU.
  virtual bool supports(LayerOp op) const = 0;
};

// The CUDA backend's providers: the GPU (answering "none" in builds without nvcc) and the
// emulated GPU (every build).
const AcceleratorProvider& cuda_accelerator();
const AcceleratorProvider& cuda_emu_accelerator();

}  // namespace strata
