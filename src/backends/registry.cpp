#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/refdev/reference_device.h"

namespace strata {

std::vector<std::string> backend_names() {
  return {"cpu", "cpu-scalar", "reference-device", "cuda-emu", "cuda"};
}

std::unique_ptr<Backend> make_backend(const std::string& name, ThreadPool& pool,
                                      std::string* why_not) {
  if (name == "cpu") return std::make_unique<CpuBackend>(pool);
  if (name == "cpu-scalar") {
    CpuBackendOptions scalar;
    scalar.kernels = &scalar_kernels();
    return std::make_unique<CpuBackend>(pool, scalar);
  }
  if (name == "reference-device") return std::make_unique<ReferenceDevice>();
  if (const AcceleratorProvider* a = find_accelerator(name)) {
    if (a->device_count() > 0) return a->make({});
    *why_not = a->unavailable_reason();
    return nullptr;
  }
  *why_not = "no backend is called '" + name + "'";
  return nullptr;
}

const AcceleratorProvider* find_accelerator(const std::string& name) {
  if (name == "cuda") return &cuda_accelerator();
  if (name == "cuda-emu") return &cuda_emu_accelerator();
  return nullptr;
}

std::vector<NamedBackend> available_backends(ThreadPool& pool) {
  std::vector<NamedBackend> all;
  for (const std::string& name : backend_names()) {
    std::string why;
    if (auto b = make_backend(name, pool, &why)) all.push_back({name, std::move(b)});
  }
  return all;
}

}  // namespace strata
