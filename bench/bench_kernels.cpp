// Matrix-vector kernels: GB/s of weight bytes read, for every type and kernel variant, on a
// matrix that fits in L2 (compute bound) and on one far larger than the caches (memory bound).
// Run: build/bench/strata_microbench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "bench_matrix.h"
#include "core/thread_pool.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

using bench::make;
using bench::Matrix;

// Q4_0/Q8_0 interleaved by 16 rows, as the engine keeps matrices it multiplies whole.
void interleave(Matrix& m) {
  m.view.rows -= m.view.rows % kInterleavedRows;
  interleave_rows16(m.view.type, m.bytes.data(), m.view.rows, m.view.cols);
  m.view.layout = Layout::Interleaved16;
}

void BM_MatVec(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const bool large = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  const auto variants = supported_kernels();
  if (state.range(3) >= static_cast<int64_t>(variants.size())) {
    state.SkipWithError("kernel variant not supported on this CPU");
    return;
  }
  const CpuKernels& k = *variants[state.range(3)];
  const int64_t cols = 2048;
  const int64_t rows = large ? (int64_t{512} << 20) / static_cast<int64_t>(row_bytes(type, cols))
                             : (int64_t{128} << 10) / static_cast<int64_t>(row_bytes(type, cols));
  Matrix m = make(type, rows, cols);
  const bool interleaved = state.range(4) != 0;
  if (interleaved) interleave(m);
  std::vector<float> x(cols, 0.5f), y(rows);
  ThreadPool pool(threads);
  for (auto _ : state) {
    matvec(k, m.view, x.data(), y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(m.view.bytes()));
  state.SetLabel(std::string(dtype_name(type)) + (interleaved ? "x16" : "") +
                 (large ? " 512MiB" : " 128KiB") + " " + k.name);
}

// Arguments: type, large (0/1), threads, kernel variant (0 scalar, 1 avx2, 2 avx512vnni),
// interleaved by 16 rows (Q4_0 and Q8_0 only).
void args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int large : {0, 1})
      for (int threads : {1, 2})
        for (int variant : {1, 2}) {
          b->Args({static_cast<int64_t>(t), large, threads, variant, 0});
          if (interleavable(t)) b->Args({static_cast<int64_t>(t), large, threads, variant, 1});
        }
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0})
    b->Args({static_cast<int64_t>(t), 0, 1, 0, 0});
}

BENCHMARK(BM_MatVec)->Apply(args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The row kernels alone on an L2-resident matrix (1 MiB), one thread: their compute ceiling.
void BM_RowKernel(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const auto variants = supported_kernels();
  if (state.range(1) >= static_cast<int64_t>(variants.size())) {
    state.SkipWithError("kernel variant not supported on this CPU");
    return;
  }
  const CpuKernels& k = *variants[state.range(1)];
  const int64_t cols = 2048;
  const int64_t rows = (int64_t{1} << 20) / static_cast<int64_t>(row_bytes(type, cols));
  Matrix m = make(type, rows, cols);
  const bool interleaved = state.range(2) != 0;
  if (interleaved) interleave(m);
  std::vector<float> x(cols, 0.5f), y(rows);
  PreparedInput in;
  in.prepare_for(k, x.data(), cols, type);
  for (auto _ : state) {
    matvec_rows(k, m.view, in, y.data(), 0, m.view.rows);  // interleave() trims to groups of 16
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(m.view.bytes()));
  state.SetLabel(std::string(dtype_name(type)) + (interleaved ? "x16 " : " ") + k.name);
}

// Arguments: type, kernel variant, interleaved (the types interleave_rows16 takes).
BENCHMARK(BM_RowKernel)
    ->ArgsProduct({{0, 1, 30, 8, 2, 10, 11, 12, 13, 14}, {0, 1, 2}, {0}})
    ->ArgsProduct({{2, 8, 12}, {0, 1, 2}, {1}})
    // Nibble unit types (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4), as rows and interleaved.
    ->ArgsProduct({{3, 6, 7, 20, 23, 39}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Prompt-batch products (matmat_multi): a 1B-shape FFN matrix (5632 x 2048 by default, from L3
// or RAM as in a model) times a batch of tokens, in multiply-adds per second (`MAC/s` counter) -- the
// figure `strata bench` sets against the compute limit. The kernel family is the CPU's best
// (STRATA_CPU=avx512vnni or avx2 picks a narrower one, without AMX).
void BM_MatMat(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t tokens = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool interleaved = state.range(3) != 0;
  const CpuKernels& k = best_kernels();
  const int64_t cols = state.range(4), rows = 5632;
  Matrix m = make(type, rows, cols);
  if (interleaved) interleave(m);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(static_cast<size_t>(tokens * cols)), y(static_cast<size_t>(tokens * rows));
  for (auto& v : x) v = d(rng);
  std::vector<PreparedInput> in(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) in[t].prepare_for(k, x.data() + t * cols, cols, type);
  ThreadPool pool(threads);
  for (auto _ : state) {
    matmat_multi(k, {MatMatJob{&m.view, y.data(), rows}}, in, pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(rows * cols * tokens),
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(type)) + (interleaved ? "x16 " : " ") + k.name);
}

// Arguments: type, tokens, threads, interleaved by 16 rows, columns.
BENCHMARK(BM_MatMat)
    ->ArgsProduct({{1, 8, 2, 12}, {64}, {1, 2}, {0}, {2048}})
    ->ArgsProduct({{8, 2, 12}, {64}, {1, 2}, {1}, {2048}})
    ->ArgsProduct({{1}, {64}, {1}, {0}, {256, 512, 8192}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata
