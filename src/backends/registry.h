// Every backend this build and machine can run, for the backend test harness and for choosing a
// device: the CPU backend with this CPU's kernels, and with the scalar reference kernels (a second
// CPU implementation that the harness holds to the same contract), the reference device (its own
// memory and queue, as a GPU: backends/refdev/reference_device.h); the CUDA backend joins here
// where it is built and a GPU is present.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"

namespace strata {

struct NamedBackend {
  std::string name;
  std::unique_ptr<Backend> backend;
};

std::vector<NamedBackend> available_backends(ThreadPool& pool);

}  // namespace strata
