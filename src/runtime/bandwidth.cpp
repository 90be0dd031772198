#include "runtime/bandwidth.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/timer.h"

namespace strata {

double measure_read_bandwidth(ThreadPool& pool, uint64_t buffer_bytes) {
  const uint64_t n = buffer_bytes / sizeof(uint64_t);
  // Huge pages, like the model weights (see core/mapped_file.h): the figure is the memory
  // system's, not the TLB's.
  void* mem = ::mmap(nullptr, n * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 0.0;
  ::madvise(mem, n * sizeof(uint64_t), MADV_HUGEPAGE);
  uint64_t* buf = static_cast<uint64_t*>(mem);
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(pool.size() * 8, 0);  // one cache line per thread
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    Timer t;
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int th) {
      // Four independent chains so the loop is bound by loads, not by the add latency.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      for (; i < e; ++i) s0 += buf[i];
      sums[th * 8] += s0 + s1 + s2 + s3;
    });
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / t.seconds());
  }
  volatile uint64_t sink = sums[0];
  (void)sink;
  ::munmap(mem, n * sizeof(uint64_t));
  return best;
}

}  // namespace strata
