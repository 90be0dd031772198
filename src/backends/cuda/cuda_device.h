// The GPU as the runtime reports it (how many, why none, what one has) and the check of a
// runtime call, for the backend (cuda_backend.cpp) and the public entry points. Built like
// them, against the real runtime or the emulator's (cuda_api.h).
#pragma once

#include <string>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"

namespace strata::STRATA_CUDA_NS {

int device_count();
// Why device_count() is 0 ("" when it is not).
std::string unavailable_reason();
// Fails with a one-line message when the device cannot be used.
CudaDeviceInfo device_info(int device);
// Fails naming `what` when a runtime call failed (the error taken, so the next launch's check
// does not report it again).
void check(cudaError_t e, const char* what);

}  // namespace strata::STRATA_CUDA_NS
