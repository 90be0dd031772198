#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cpu/kernels.h"

namespace strata {

const CpuKernels* avx2_kernels_unchecked();

const CpuKernels* avx2_kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return avx2_kernels_unchecked();
#endif
  return nullptr;
}

const CpuKernels& best_kernels() {
  static const CpuKernels* chosen = [] {
    const char* force = std::getenv("STRATA_CPU");
    const std::string want = force ? force : "";
    if (want == "scalar") return &scalar_kernels();
    const CpuKernels* avx2 = avx2_kernels();
    if (want == "avx2" && avx2 == nullptr) fail("STRATA_CPU=avx2 but this CPU lacks AVX2/FMA/F16C");
    if (!want.empty() && want != "avx2") fail("STRATA_CPU='{}' is not one of: scalar, avx2", want);
    return avx2 != nullptr ? avx2 : &scalar_kernels();
  }();
  return *chosen;
}

}  // namespace strata
