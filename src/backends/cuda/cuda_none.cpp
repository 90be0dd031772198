// The CUDA entry points of a build without nvcc: no GPU can be used, and saying so is all
// they do.
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"

namespace strata {

int cuda_device_count() {
  return 0;
}

std::string cuda_unavailable_reason() {
  return "this build has no CUDA backend (nvcc was not found when it was built)";
}

CudaDeviceInfo cuda_device_info(int) {
  fail("{}", cuda_unavailable_reason());
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions&) {
  fail("{}", cuda_unavailable_reason());
}

double cuda_read_bandwidth(Backend&) {
  fail("{}", cuda_unavailable_reason());
}

}  // namespace strata
