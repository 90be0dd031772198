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

#include "core/thread_pool.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matvec.h"
#include "tensor/interleaved_rows.h"
#include "tensor/quantize.h"

namespace strata {
namespace {

// Weights in transparent huge pages, as the engine keeps them (MappedFile read mode): with 4 KiB
// pages, scattered row reads would mostly measure TLB misses.
struct HugePageBuffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  void resize(size_t bytes) {
    n = (bytes + (size_t{2} << 20) - 1) & ~((size_t{2} << 20) - 1);
    void* v = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) std::abort();
    ::madvise(v, n, MADV_HUGEPAGE);
    p = static_cast<uint8_t*>(v);
  }
  uint8_t* data() const { return p; }
  HugePageBuffer() = default;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer(HugePageBuffer&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  ~HugePageBuffer() {
    if (p) ::munmap(p, n);
  }
};

struct Matrix {
  HugePageBuffer bytes;
  MatrixView view;
};

Matrix make(DType type, int64_t rows, int64_t cols) {
  Matrix m;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> row(cols);
  const uint64_t rb = row_bytes(type, cols);
  m.bytes.resize(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 64)
      for (auto& v : row) v = d(rng);
    quantize_row(type, row.data(), m.bytes.data() + r * rb, cols);
  }
  m.view = {type, m.bytes.data(), cols, rows, rb};
  return m;
}

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
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
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
  in.prepare(k, x.data(), cols, needs_q8_input(type));
  for (auto _ : state) {
    matvec_rows(k, m.view, in, y.data(), 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(m.view.bytes()));
  state.SetLabel(std::string(dtype_name(type)) + (interleaved ? "x16 " : " ") + k.name);
}

// Arguments: type, kernel variant, interleaved (Q4_0 and Q8_0 only).
BENCHMARK(BM_RowKernel)
    ->ArgsProduct({{0, 1, 30, 8, 2}, {0, 1, 2}, {0}})
    ->ArgsProduct({{2, 8}, {0, 1, 2}, {1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata

#include "kernels/cpu/sparse_ops.h"

namespace strata {
namespace {

// Sparse operators read a few rows of matrices far larger than the caches. This VM reports a
// 480 MB L3, so a benchmark that cycles over a few hundred MB with fixed row lists measures L3,
// not RAM (sessions 3-5 did: the Q4_0 gate/up gather read 27.7 GB/s with 84 MB of rows touched
// per cycle and 14.5 GB/s with 336 MB). So: `copies` of an FFN matrix totalling >= 3 GiB (one
// copy quantized, the rest memcpy'd), and a different random row list (from a pool of kLists)
// on every pass, so the rows touched over time cover the whole 3 GiB and at most a sixth of
// them can be in L3.
constexpr int64_t kSparseBytes = int64_t{3} << 30;
constexpr int kLists = 509;  // prime: the (copy, list) pairs do not repeat in step

Matrix make_copies(DType type, int64_t rows, int64_t cols, int64_t& copies) {
  const int64_t copy_bytes = rows * static_cast<int64_t>(row_bytes(type, cols));
  copies = (kSparseBytes + copy_bytes - 1) / copy_bytes;
  Matrix one = make(type, rows, cols);
  Matrix m;
  m.bytes.resize(static_cast<size_t>(copy_bytes * copies));
  for (int64_t c = 0; c < copies; ++c)
    std::memcpy(m.bytes.data() + c * copy_bytes, one.bytes.data(), static_cast<size_t>(copy_bytes));
  m.view = one.view;
  m.view.data = m.bytes.data();
  m.view.rows = rows * copies;
  return m;
}

// kLists random row lists over p.size() rows, row i drawn with probability p[i].
std::vector<std::vector<int32_t>> random_lists(const std::vector<double>& p, uint32_t seed) {
  std::vector<std::vector<int32_t>> lists(kLists);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& list : lists)
    for (int32_t i = 0; i < static_cast<int32_t>(p.size()); ++i)
      if (u(rng) < p[static_cast<size_t>(i)]) list.push_back(i);
  return lists;
}

// The neuron-aware operators on FFN-shaped matrices (n_ff 5632 rows of n_embd 2048, the 1B
// shape), over a random 10% (or the given per-mille) of the rows. GB/s counts the bytes of the
// selected rows only: the figure to compare with the memory bandwidth.
void BM_SparseOp(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const bool axpy = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  const double density = static_cast<double>(state.range(3)) / 1000.0;
  const int64_t n_ff = 5632, n_embd = 2048;
  int64_t copies = 0;
  const Matrix m = make_copies(type, n_ff, n_embd, copies);
  // Uniformly random rows, or (hot_first) rows firing with power-law probabilities
  // min(0.98, C (i+1)^-0.7) in index order, as after sorting neurons by a profile's counts.
  const bool hot_first = state.range(4) != 0;
  std::vector<double> p(n_ff, density);
  if (hot_first) {
    double lo = 0, hi = 1e6;
    for (int it = 0; it < 100; ++it) {
      const double c = 0.5 * (lo + hi);
      double sum = 0;
      for (int64_t i = 0; i < n_ff; ++i) sum += std::min(0.98, c * std::pow(i + 1.0, -0.7));
      (sum / n_ff < density ? lo : hi) = c;
    }
    for (int64_t i = 0; i < n_ff; ++i) p[i] = std::min(0.98, lo * std::pow(i + 1.0, -0.7));
  }
  const auto ids = random_lists(p, 7);
  std::vector<float> x(n_embd, 0.5f), y(n_ff), coef(n_ff, 0.25f), out(n_embd);
  PreparedInput in;
  const CpuKernels& k = best_kernels();
  in.prepare(k, x.data(), n_embd, needs_q8_input(type));
  ThreadPool pool(threads);
  int64_t bytes = 0, c = 0, pass = 0;
  for (auto _ : state) {
    MatrixView part = m.view;
    part.data += static_cast<uint64_t>(c) * n_ff * m.view.row_bytes;
    part.rows = n_ff;
    const std::vector<int32_t>& list = ids[static_cast<size_t>(pass % kLists)];
    if (axpy) {
      axpy_rows(k, part, list, coef.data(), n_ff, 1, out.data(), n_embd, pool);
    } else {
      const GatherJob job{&part, y.data(), n_ff};
      gather_matmat(k, std::span(&job, 1), list, std::span(&in, 1), pool);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(y.data());
    bytes += static_cast<int64_t>(list.size() * m.view.row_bytes);
    c = (c + 1) % copies;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::string(dtype_name(type)) + (axpy ? " axpy" : " gather") + " density " +
                 std::to_string(density).substr(0, 5) + (hot_first ? " hot-first " : " ") + k.name);
}

// Gate and up rows of the 7B shape (n_ff 11008 of n_embd 4096), >= 3 GiB of layers and a
// different row list per pass (see kSparseBytes), 14% of neurons (the 7B predictors' computed
// density):
// separate matrices (as in the file) or bundled, each neuron's gate row followed by its up row
// (one 2-row-long read per neuron). GB/s of the selected rows.
void BM_GatherGateUp(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const bool bundled = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  const int64_t n_ff = 11008, n_embd = 4096;
  int64_t layers = 0;
  const Matrix m = make_copies(type, 2 * n_ff, n_embd, layers);
  const uint64_t rb = m.view.row_bytes;
  const auto ids = random_lists(std::vector<double>(n_ff, 0.14), 5);
  std::vector<float> x(n_embd, 0.5f), gate(n_ff), up(n_ff);
  PreparedInput in;
  const CpuKernels& k = best_kernels();
  in.prepare(k, x.data(), n_embd, needs_q8_input(type));
  ThreadPool pool(threads);
  int64_t bytes = 0, c = 0, pass = 0;
  for (auto _ : state) {
    MatrixView g = m.view, v = m.view;
    g.rows = v.rows = n_ff;
    g.data += static_cast<uint64_t>(c) * 2 * n_ff * rb;
    if (bundled) {
      g.row_bytes = v.row_bytes = 2 * rb;  // row i of gate at 2i, of up at 2i + 1
      v.data = g.data + rb;
    } else {
      v.data = g.data + n_ff * rb;
    }
    const GatherJob jobs[2] = {{&g, gate.data(), n_ff}, {&v, up.data(), n_ff}};
    const std::vector<int32_t>& list = ids[static_cast<size_t>(pass % kLists)];
    gather_matmat(k, jobs, list, std::span(&in, 1), pool);
    benchmark::DoNotOptimize(gate.data());
    benchmark::DoNotOptimize(up.data());
    bytes += static_cast<int64_t>(2 * list.size() * rb);
    c = (c + 1) % layers;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::string(dtype_name(type)) + (bundled ? " bundled" : " separate") + " " +
                 k.name);
}

BENCHMARK(BM_GatherGateUp)
    ->ArgsProduct({{static_cast<int64_t>(DType::Q4_0), static_cast<int64_t>(DType::Q8_0),
                    static_cast<int64_t>(DType::F16)},
                   {0, 1},
                   {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void sparse_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
    for (int axpy : {0, 1})
      for (int threads : {1, 2}) b->Args({static_cast<int64_t>(t), axpy, threads, 100, 0});
  for (int per_mille : {20, 250, 1000})
    for (int axpy : {0, 1}) b->Args({static_cast<int64_t>(DType::Q8_0), axpy, 2, per_mille, 0});
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0})
    for (int axpy : {0, 1}) b->Args({static_cast<int64_t>(t), axpy, 2, 100, 1});
}

BENCHMARK(BM_SparseOp)->Apply(sparse_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strata
