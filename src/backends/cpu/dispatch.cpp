#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace strata {

const CpuKernels* avx2_kernels_unchecked(ColumnReadAhead r);
const CpuKernels* avx512vnni_kernels_unchecked(ColumnReadAhead r);

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

const CpuKernels* avx2_kernels(ColumnReadAhead r) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
    return avx2_kernels_unchecked(r);
#endif
  (void)r;
  return nullptr;
}

const CpuKernels* avx512vnni_kernels(ColumnReadAhead r) {
#if defined(__x86_64__)
  if (avx2_kernels() != nullptr && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return avx512vnni_kernels_unchecked(r);
#endif
  (void)r;
  return nullptr;
}

namespace {

// Scalar, then the instruction sets this CPU has with read-ahead r, fastest last.
std::vector<const CpuKernels*> instruction_sets(ColumnReadAhead r) {
  std::vector<const CpuKernels*> all = {&scalar_kernels()};
  if (const CpuKernels* k = avx2_kernels(r)) all.push_back(k);
  if (const CpuKernels* k = avx512vnni_kernels(r)) all.push_back(k);
  return all;
}

}  // namespace

std::vector<const CpuKernels*> supported_kernels() {
  std::vector<const CpuKernels*> all = instruction_sets(ColumnReadAhead::Far);
  const std::vector<const CpuKernels*> near = instruction_sets(ColumnReadAhead::Near);
  all.insert(all.end(), near.begin() + 1, near.end());
  return all;
}

const CpuKernels& best_kernels() {
  static const CpuKernels* chosen = [] {
    const char* force = std::getenv("STRATA_CPU");
    const std::string want = force ? force : "";
    const auto all = instruction_sets(chosen_column_read_ahead());
    if (want.empty()) return all.back();
    for (const CpuKernels* k : all)
      if (want == k->name) return k;
    fail("STRATA_CPU='{}' is not available on this CPU (scalar, avx2, avx512vnni)", want);
  }();
  return *chosen;
}

std::string kernels_label(const CpuKernels& k) {
  if (std::string(k.name) == "scalar") return k.name;
  return std::string(k.name) + " " + column_read_ahead_name(k.read_ahead);
}

}  // namespace strata
