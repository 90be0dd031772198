// The bandwidth probe of `strata bench` (issue 29): it measured a 1 GiB buffer outside
// --ram-budget, with a pattern slower than decode. Now its limit is the decode kernels' rate over
// the model's own matrices, and a buffer is used only where the budget has room for it.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "model/model.h"
#include "planning/bandwidth.h"
#include "test_helpers.h"

namespace strata {
namespace {

TEST(Bandwidth, ResidentMatricesAreTheDecodeMatricesEachOnce) {
  const auto m = Model::load(strata::testing::tiny_model(DType::F16, FfnActivation::SwiGLU), false);
  const std::vector<ReadRegion> regions = resident_matrices(*m);
  uint64_t bytes = 0;
  for (const ReadRegion& r : regions) bytes += r.bytes;
  // Everything a decode step reads but the one embedding row.
  EXPECT_EQ(bytes + m->weights.token_embd.row_bytes, m->weights.bytes_read_per_token());
  ThreadPool pool(2);
  EXPECT_GT(measure_read_bandwidth(pool, regions), 0.0);
}

TEST(Bandwidth, ProbeTakesNoBufferTheBudgetCannotHold) {
  const auto m = Model::load(strata::testing::tiny_model(DType::F16, FfnActivation::SwiGLU), false);
  ThreadPool pool(2);
  CpuBackend cpu(pool);
  // The tiny model's matrices are far below the probe's working set, and the budget leaves
  // 1 MiB: the memory is not measured (no buffer is taken for it), the kernels are.
  const BandwidthProbe p = probe_bandwidth(cpu, pool, *m, uint64_t{1} << 20);
  EXPECT_EQ(p.memory_bytes_per_s, 0.0);
  EXPECT_NE(p.memory_note.find("not measured"), std::string::npos) << p.memory_note;
  EXPECT_GT(p.bytes_per_s, 0.0);
  EXPECT_NE(p.note.find("decode kernels"), std::string::npos) << p.note;
  // With room in the budget, a buffer of the probe's size is streamed.
  const BandwidthProbe roomy = probe_bandwidth(cpu, pool, *m, UINT64_MAX);
  EXPECT_GT(roomy.memory_bytes_per_s, 0.0);
  EXPECT_NE(roomy.memory_note.find("buffer"), std::string::npos) << roomy.memory_note;
}

}  // namespace
}  // namespace strata
