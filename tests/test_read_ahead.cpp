// The read-ahead policy (backends/cpu/read_ahead.h): which CPUs get which, the override, and
// that the engine's table is the policy's choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu/read_ahead.h"

namespace strata {
namespace {

TEST(ReadAhead, NearOnlyWhereMeasuredFaster) {
  EXPECT_EQ(column_read_ahead({"AuthenticAMD", 0x19, 0x11}), ColumnReadAhead::Near);  // Zen 4
  EXPECT_EQ(column_read_ahead({"AuthenticAMD", 0x19, 0x61}), ColumnReadAhead::Near);
  // Not measured: Zen 5 (family 0x1A), older AMD, Intel, no CPUID.
  EXPECT_EQ(column_read_ahead({"AuthenticAMD", 0x1A, 0x02}), ColumnReadAhead::Far);
  EXPECT_EQ(column_read_ahead({"AuthenticAMD", 0x17, 0x31}), ColumnReadAhead::Far);
  EXPECT_EQ(column_read_ahead({"GenuineIntel", 6, 0x8F}), ColumnReadAhead::Far);
  EXPECT_EQ(column_read_ahead({"", 0, 0}), ColumnReadAhead::Far);
  EXPECT_STREQ(column_read_ahead_name(ColumnReadAhead::Near), "near");
  EXPECT_STREQ(column_read_ahead_name(ColumnReadAhead::Far), "far");
}

TEST(ReadAhead, ThisCpusIdentityIsRead) {
#if defined(__x86_64__)
  const CpuIdentity id = this_cpu_identity();
  EXPECT_EQ(id.vendor.size(), 12u) << id.vendor;
  EXPECT_GT(id.family, 0);
#else
  GTEST_SKIP() << "no CPUID";
#endif
}

// Sets STRATA_READ_AHEAD for one scope.
struct ReadAheadVariable {
  std::string before;
  bool had = false;
  explicit ReadAheadVariable(const char* value) {
    if (const char* v = std::getenv("STRATA_READ_AHEAD")) before = v, had = true;
    setenv("STRATA_READ_AHEAD", value, 1);
  }
  ~ReadAheadVariable() {
    if (had)
      setenv("STRATA_READ_AHEAD", before.c_str(), 1);
    else
      unsetenv("STRATA_READ_AHEAD");
  }
};

TEST(ReadAhead, TheVariableOverridesThePolicyAndBadValuesAreRefused) {
  {
    const ReadAheadVariable v("near");
    EXPECT_EQ(chosen_column_read_ahead(), ColumnReadAhead::Near);
  }
  {
    const ReadAheadVariable v("far");
    EXPECT_EQ(chosen_column_read_ahead(), ColumnReadAhead::Far);
  }
  {
    const ReadAheadVariable v("sideways");
    try {
      chosen_column_read_ahead();
      FAIL() << "accepted STRATA_READ_AHEAD=sideways";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("STRATA_READ_AHEAD='sideways'"), std::string::npos)
          << e.what();
    }
  }
  {
    const ReadAheadVariable v("");
    EXPECT_EQ(chosen_column_read_ahead(), column_read_ahead(this_cpu_identity()));
  }
}

TEST(ReadAhead, TheEngineRunsThePoliciesTable) {
  const CpuKernels& k = best_kernels();
  if (std::string(k.name) == "scalar") GTEST_SKIP() << "scalar kernels read nothing ahead";
  const char* forced = std::getenv("STRATA_READ_AHEAD");
  if (forced != nullptr && *forced != '\0') GTEST_SKIP() << "STRATA_READ_AHEAD is set";
  EXPECT_EQ(k.read_ahead, column_read_ahead(this_cpu_identity()));
  EXPECT_EQ(kernels_label(k), std::string(k.name) + " " + column_read_ahead_name(k.read_ahead));
}

}  // namespace
}  // namespace strata
