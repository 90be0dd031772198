// The emulated CUDA runtime: the part of the CUDA runtime API that cuda_backend.cpp calls, with
// CUDA's names and signatures in namespace strata::cuda_emu, so the real backend's source builds
// and runs against it (cuda_api.h picks this or the real one). One emulated device:
//   - device memory is host memory, each cudaMalloc its own heap block (AddressSanitizer sees
//     overruns); it counts against the device's memory at the driver's 2 MiB granularity, so
//     cudaMemGetInfo shows what many small allocations really cost;
//   - a stream is a worker thread running its operations in order; kernels (emu/launch.h) run
//     there, one at a time across all streams; cudaStreamSynchronize and cudaEventSynchronize
//     wait for it (the only ordering a host thread gets, so a host read before them is a race
//     to ThreadSanitizer);
//   - copies: from pageable host memory the bytes are read when the copy runs, not when it is
//     queued (CUDA promises no more), to pageable memory the call waits; pinned memory
//     (cudaMallocHost) both ways asynchronously. Copies and memsets check that their device
//     side lies in device memory and their host side does not;
//   - a fault in a kernel (emu/grid.h) is sticky: later operations on the stream are skipped
//     and every later call on it returns cudaErrorLaunchFailure, whose text names the fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/emu/grid.h"

namespace strata::cuda_emu {

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
};

inline constexpr unsigned cudaStreamNonBlocking = 0x01;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int warpSize;
  size_t sharedMemPerBlock;
  int maxThreadsPerBlock;
};

struct EmuStream;
struct EmuEvent;
using cudaStream_t = EmuStream*;
using cudaEvent_t = EmuEvent*;

cudaError_t cudaGetDeviceCount(int* count);
// The CUDA version the emulator stands for (13.0).
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// --- the emulator's own ---
// Queues a kernel launch on the stream (null: the default stream), after checking its shape
// (a bad shape is the launching thread's cudaGetLastError, as on a GPU). `body` runs as each
// CUDA thread.
void enqueue_kernel(cudaStream_t stream, const char* kernel, const LaunchShape& shape,
                    std::function<void()> body);
// Queues host work on the stream, in order with its other operations (the emulated cuBLAS).
void enqueue_host(cudaStream_t stream, std::function<void()> work);

// The emulated device's memory, and what is live, for tests that measure footprints and leaks.
inline constexpr uint64_t kDeviceBytes = uint64_t{16} << 30;
inline constexpr uint64_t kAllocationGranularity = uint64_t{2} << 20;
struct Census {
  uint64_t device_allocations = 0, device_footprint = 0, pinned_allocations = 0, streams = 0,
           events = 0;
};
Census census();

}  // namespace strata::cuda_emu
