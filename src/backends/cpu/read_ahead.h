// How the column products' kernels read their rows ahead: the one tuning of the CPU kernels that
// depends on the processor's hardware prefetchers rather than on its instruction set, so it is
// chosen here, by a policy over the CPU's identity, and dispatch.cpp installs the matching table.
//
// The kernels concerned sum scattered rows of a few KiB each (axpy over F32/F16/BF16 rows: TEAL's
// column copies and ffn_down_t; Q8_0 column groups): several rows are read at once as separate
// streams, each a few pages long.
// - Far: sub-groups of 4 rows, every line requested 2 KiB ahead of the chunk being summed and,
//   past a row's end, into the rows that come next (session 27's tuning, on a machine whose
//   prefetchers did not follow the short streams: 43-46 GB/s against 27-29 without requests).
// - Near: sub-groups of 8 rows (y loaded and stored half as often) and no software requests:
//   on an AMD EPYC (Zen 4, family 0x19) the requests cost more than they bring, since the
//   hardware follows the 8 streams (BM_InputColumns F16 at 50%, 2 threads: 22-24 GB/s Far,
//   29-32 Near, dense 32; Q8_0 column groups 20-22 -> 23-24).
// Both read the same rows and add in the same order: their results are the same bits.
#pragma once

#include <string>

namespace strata {

enum class ColumnReadAhead { Far, Near };

const char* column_read_ahead_name(ColumnReadAhead r);

// What the policy looks at: CPUID's vendor string and display family/model.
struct CpuIdentity {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ... ("" where there is no CPUID)
  int family = 0;
  int model = 0;
};

CpuIdentity this_cpu_identity();

// The read-ahead the kernels use on this CPU: Near on AMD family 0x19 (measured on model 0x11, a
// Zen 4 EPYC; the family's other models share its prefetchers), Far elsewhere, including the
// CPUs not yet measured.
ColumnReadAhead column_read_ahead(const CpuIdentity& cpu);

// STRATA_READ_AHEAD=far|near, where set, overrides the policy (to measure the other on a new
// machine); anything else is refused with a one-line error.
ColumnReadAhead chosen_column_read_ahead();

}  // namespace strata
