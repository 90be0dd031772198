#include "backends/cuda/cuda_device.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"

namespace strata::STRATA_CUDA_NS {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  fail("CUDA {}: {}", what, cudaGetErrorString(e));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear it
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  // Without a loaded NVIDIA driver the runtime says "CUDA driver version is insufficient",
  // which reads as "update your driver" on a machine that has no GPU at all.
  const bool driver_loaded = std::filesystem::exists("/proc/driver/nvidia/version");
  if ((e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || n == 0) && !driver_loaded)
    return "no NVIDIA GPU driver is loaded on this machine (no GPU, or its driver is not "
           "installed)";
  if (e == cudaErrorInsufficientDriver) {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return fmt::format("the NVIDIA driver is older than this build's CUDA {}.{} needs: update it",
                       runtime / 1000, runtime % 1000 / 10);
  }
  if (e != cudaSuccess) return fmt::format("no CUDA GPU can be used: {}", cudaGetErrorString(e));
  return n == 0 ? "no CUDA GPU was found" : "";
}

CudaDeviceInfo device_info(int device) {
  if (device_count() <= device) fail("{}", unavailable_reason());
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  CudaDeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
  info.peak_bytes_per_s = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // double data rate
  check(cudaSetDevice(device), "cudaSetDevice");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  info.free_bytes = free;
  info.total_bytes = total;
  return info;
}

}  // namespace strata::STRATA_CUDA_NS
