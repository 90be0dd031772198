#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/cpu/kernels.h"

namespace strata {

const CpuKernels* avx2_kernels_unchecked();
const CpuKernels* avx512vnni_kernels_unchecked();

const CpuKernels* avx2_kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return avx2_kernels_unchecked();
#endif
  return nullptr;
}

const CpuKernels* avx512vnni_kernels() {
#if defined(__x86_64__)
  if (avx2_kernels() != nullptr && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return avx512vnni_kernels_unchecked();
#endif
  return nullptr;
}

std::vector<const CpuKernels*> supported_kernels() {
  std::vector<const CpuKernels*> all = {&scalar_kernels()};
  if (const CpuKernels* k = avx2_kernels()) all.push_back(k);
  if (const CpuKernels* k = avx512vnni_kernels()) all.push_back(k);
  return all;
}

const CpuKernels& best_kernels() {
  static const CpuKernels* chosen = [] {
    const char* force = std::getenv("STRATA_CPU");
    const std::string want = force ? force : "";
    const auto all = supported_kernels();
    if (want.empty()) return all.back();
    for (const CpuKernels* k : all)
      if (want == k->name) return k;
    fail("STRATA_CPU='{}' is not available on this CPU (scalar, avx2, avx512vnni)", want);
  }();
  return *chosen;
}

}  // namespace strata
