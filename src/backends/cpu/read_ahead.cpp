#include "backends/cpu/read_ahead.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/error.h"

namespace strata {

const char* column_read_ahead_name(ColumnReadAhead r) {
  return r == ColumnReadAhead::Near ? "near" : "far";
}

CpuIdentity this_cpu_identity() {
  CpuIdentity id;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return id;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.vendor = vendor;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return id;
  // The display family and model: the extended fields count when the base family is 0xF (and
  // the extended model for family 6 as well).
  const int base_family = static_cast<int>((eax >> 8) & 0xF);
  const int base_model = static_cast<int>((eax >> 4) & 0xF);
  id.family = base_family == 0xF ? base_family + static_cast<int>((eax >> 20) & 0xFF) : base_family;
  id.model = base_family == 0xF || base_family == 6
                 ? (static_cast<int>((eax >> 16) & 0xF) << 4) + base_model
                 : base_model;
#endif
  return id;
}

ColumnReadAhead column_read_ahead(const CpuIdentity& cpu) {
  if (cpu.vendor == "AuthenticAMD" && cpu.family == 0x19) return ColumnReadAhead::Near;
  return ColumnReadAhead::Far;
}

ColumnReadAhead chosen_column_read_ahead() {
  const char* force = std::getenv("STRATA_READ_AHEAD");
  if (force == nullptr || *force == '\0') return column_read_ahead(this_cpu_identity());
  if (std::strcmp(force, "far") == 0) return ColumnReadAhead::Far;
  if (std::strcmp(force, "near") == 0) return ColumnReadAhead::Near;
  fail("STRATA_READ_AHEAD='{}' is not a read-ahead (far, near)", force);
}

}  // namespace strata
