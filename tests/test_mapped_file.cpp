// MappedFile's read mode (the file copied into anonymous memory by several threads, in 64 MiB
// pieces, around holes) against the plain mapping of the same file; AnonymousMemory (the KV
// cache's memory) populated up front.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "core/anonymous_memory.h"
#include "core/mapped_file.h"
#include "core/input_file.h"
#include "core/mapping_faults.h"
#include "test_helpers.h"

namespace strata {
namespace {

uint8_t pattern(uint64_t i) {
  return static_cast<uint8_t>((i * 2654435761u) >> 13);
}

TEST(MappedFile, ReadModeCopiesEveryByteOutsideTheHoles) {
  // Three pieces and a tail, holes inside a piece, across a piece boundary and at the end.
  const uint64_t size = (uint64_t{150} << 20) + 12345;
  const std::string path = testing::temp_file("mapped_file.bin");
  {
    std::vector<uint8_t> bytes(size);
    for (uint64_t i = 0; i < size; ++i) bytes[i] = pattern(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, size, f), size);
    std::fclose(f);
  }
  const MappedFile::Ranges holes = {
      {(uint64_t{64} << 20) - 1000, uint64_t{3} << 20}, {1000, 4000}, {size - 345, 345}};
  auto in_hole = [&](uint64_t i) {
    for (const auto& [offset, bytes] : holes)
      if (i >= offset && i < offset + bytes) return true;
    return false;
  };
  const MappedFile mapped(path, LoadMode::Map);
  for (const MappedFile::Ranges& h : {MappedFile::Ranges{}, holes}) {
    const MappedFile read(path, LoadMode::Read, h);
    ASSERT_EQ(read.size(), size);
    uint64_t checked = 0;
    for (uint64_t i = 0; i < size; ++i) {
      if (!h.empty() && in_hole(i)) continue;  // never read: left as fresh (zero) memory
      if (read.data()[i] != mapped.data()[i]) FAIL() << "byte " << i << " differs";
      ++checked;
    }
    EXPECT_EQ(checked, h.empty() ? size : size - (uint64_t{3} << 20) - 4000 - 345);
  }
  std::remove(path.c_str());
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Issue 52.15: a mapped file truncated under the process (`serve --mmap`, the model replaced)
// raised SIGBUS with no message. Now one line naming the file, and exit status 74.
TEST(MappedFileDeathTest, ATruncatedMappingIsAnErrorNamingTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = testing::temp_file("truncated_under_us.bin");
  write_text_file(path, std::string(1 << 20, 'x'));
  EXPECT_EXIT(
      {
        MappedFile f(path, LoadMode::Map);
        if (::truncate(path.c_str(), 4096) != 0) std::_Exit(3);
        volatile uint8_t b = f.data()[f.size() - 1];
        (void)b;
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(kMappingFaultExitCode),
      "error: '.*truncated_under_us.bin' changed while strata had it mapped");
}

TEST(AnonymousMemory, PopulatedMemoryIsZeroAndWritesNeedNoPageFaults) {
  const uint64_t size = (uint64_t{64} << 20) + 4096 * 3;  // not a whole number of huge pages
  AnonymousMemory m(size);
  ASSERT_EQ(m.size(), size);
  ThreadPool pool(2);
  m.populate(pool);
  const long before = minor_faults();
  uint64_t nonzero = 0;
  for (uint64_t at = 0; at < size; at += 4096) {
    nonzero += m.data()[at] != 0;
    m.data()[at] = 1;
  }
  m.data()[size - 1] = 1;
  // Unpopulated, these writes fault once per 4 KiB page (16387 of them) or per huge page.
  EXPECT_LT(minor_faults() - before, 8);
  EXPECT_EQ(nonzero, 0u);
  AnonymousMemory moved = std::move(m);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(moved.data()[size - 1], 1);
}

TEST(AnonymousMemory, AvailableMemoryIsReadAndBelowThePhysicalMemory) {
  // Sessions refuse a KV cache larger than this instead of populating it into the OOM killer.
  const uint64_t physical =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t available = AnonymousMemory::available();
  EXPECT_GT(available, uint64_t{1} << 20);
  EXPECT_LE(available, physical);
}

}  // namespace
}  // namespace strata
