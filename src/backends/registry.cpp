#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"

namespace strata {

std::vector<NamedBackend> available_backends(ThreadPool& pool) {
  std::vector<NamedBackend> all;
  all.push_back({"cpu", std::make_unique<CpuBackend>(pool)});
  CpuBackendOptions scalar;
  scalar.kernels = &scalar_kernels();
  all.push_back({"cpu-scalar", std::make_unique<CpuBackend>(pool, scalar)});
  all.push_back({"reference-device", std::make_unique<ReferenceDevice>()});
  return all;
}

}  // namespace strata
