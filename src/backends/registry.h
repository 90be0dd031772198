// Every backend this build knows, by name, for the backend test harness and for choosing a
// device: the CPU backend with this CPU's kernels ("cpu") and with the scalar reference kernels
// ("cpu-scalar", a second CPU implementation the harness holds to the same contract), the
// reference device ("reference-device": its own memory and queue, as a GPU;
// backends/refdev/reference_device.h), the CUDA backend on the emulated GPU ("cuda-emu": its
// kernels and host code run on the CPU, in every build) and the CUDA backend ("cuda"), present
// where the build has it and the machine a GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/accelerator.h"
#include "backends/backend.h"
#include "core/thread_pool.h"

namespace strata {

struct NamedBackend {
  std::string name;
  std::unique_ptr<Backend> backend;
};

// The names of every backend, whether or not this machine can make it.
std::vector<std::string> backend_names();
// The backend of that name, or null with *why_not saying why this build or machine has none.
std::unique_ptr<Backend> make_backend(const std::string& name, ThreadPool& pool,
                                      std::string* why_not);
// The accelerator of that backend name ("cuda", "cuda-emu"), or null for a name that is none.
const AcceleratorProvider* find_accelerator(const std::string& name);
// Those this machine can make.
std::vector<NamedBackend> available_backends(ThreadPool& pool);

}  // namespace strata
