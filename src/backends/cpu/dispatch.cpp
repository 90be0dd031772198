#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace strata {

const CpuKernels* avx2_kernels_unchecked();
const CpuKernels* avx512vnni_kernels_unchecked();

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

const CpuKernels* avx2_kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
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
