// The CUDA backend: the backend interface on one NVIDIA GPU (kernels in kernels_*.cu, cuBLAS
// for batched products), built whenever CMake finds nvcc (STRATA_HAVE_CUDA). This header is
// plain C++: without CUDA the functions below report that no GPU can be used.
//
// Memory: one allocator counts every buffer the backend holds (weights, KV cache, workspace,
// its own scratch and cuBLAS's workspace) against the budget: --vram-budget, or what the
// device reports free when none is given; an allocation past it is a one-line error naming the
// buffer. Results: every output element is computed by one thread or warp in a fixed order,
// with no floating-point atomics, so a run's logits are the same bits every time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"

namespace strata {

struct CudaOptions {
  int device = 0;
  uint64_t budget = 0;  // bytes it may hold; 0: what the device has free at creation
};

struct CudaDeviceInfo {
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  uint64_t total_bytes = 0, free_bytes = 0;
  double peak_bytes_per_s = 0;  // from the memory clock and bus width
};

// GPUs this build can use on this machine: 0 without CUDA in the build, a driver or a device.
int cuda_device_count();
// Why cuda_device_count() is 0, for the one-line notice ("this build has no CUDA backend").
std::string cuda_unavailable_reason();
// Fails with a one-line message when the device cannot be used.
CudaDeviceInfo cuda_device_info(int device);
// Fails with a one-line message (no GPU, a budget above what is free, ...).
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);
// Read bandwidth of the backend's device memory, measured by a kernel that only reads (median
// of 5 passes over a buffer of up to 1 GiB, allocated within the budget): `strata bench`'s
// limit. Fails when `backend` is not a CUDA backend.
double cuda_read_bandwidth(Backend& backend);

// The same backend on the emulated GPU (backends/cuda/emu/: the kernels compiled as C++, run
// on the CPU), in every build: for tests, slow. Its device reports 16 GiB.
std::unique_ptr<Backend> make_cuda_emu_backend(const CudaOptions& options);
CudaDeviceInfo cuda_emu_device_info();

// Bytes the backend allocates for itself when made (scratch, cuBLAS workspace): the placement
// inventory counts them.
uint64_t cuda_backend_overhead_bytes();

}  // namespace strata
