// The neuron-aware operators (sparse FFN) from RAM: GB/s of the rows they read.
// Run: build/bench/strata_microbench --benchmark_filter='Sparse|GateUp'
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matvec.h"
#include "backends/cpu/sparse_ops.h"
#include "bench_matrix.h"
#include "core/thread_pool.h"
#include "model/column_group_copy.h"
#include "tensor/column_groups.h"
#include "tensor/interleaved_rows.h"

namespace strata {
namespace {

using namespace bench;

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

// The 7B FFN shape for the whole-layer benchmarks below: `count` matrices per layer (gate, up,
// down_t: n_ff rows of n_embd), >= 3 GiB of layers, random lists of 14% of the neurons (the 7B
// predictors' computed density), an input prepared for the type.
struct SevenBFfn {
  static constexpr int64_t n_ff = 11008, n_embd = 4096;
  int count;
  int64_t layers = 0;
  Matrix m;
  uint64_t rb;
  std::vector<std::vector<int32_t>> lists = random_lists(std::vector<double>(n_ff, 0.14), 5);
  std::vector<float> x = std::vector<float>(n_embd, 0.5f);
  const CpuKernels& k = best_kernels();
  PreparedInput in;
  SevenBFfn(DType type, int matrices)
      : count(matrices),
        m(make_copies(type, matrices * n_ff, n_embd, layers)),
        rb(m.view.row_bytes) {
    in.prepare(k, x.data(), n_embd, needs_q8_input(type));
  }
  // Matrix j of layer c: separate (as in the file) or bundled (neuron i's rows of all the
  // matrices back to back, the flash tier's layout).
  MatrixView view(int64_t c, int j, bool bundled) const {
    MatrixView v = m.view;
    v.rows = n_ff;
    v.data += static_cast<uint64_t>(c) * count * n_ff * rb + j * (bundled ? rb : n_ff * rb);
    if (bundled) v.row_bytes = count * rb;
    return v;
  }
};

// Gate and up rows of the 7B shape (n_ff 11008 of n_embd 4096), >= 3 GiB of layers and a
// different row list per pass (see kSparseBytes), 14% of neurons (the 7B predictors' computed
// density):
// separate matrices (as in the file) or bundled, each neuron's gate row followed by its up row
// (one 2-row-long read per neuron). GB/s of the selected rows.
void BM_GatherGateUp(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const bool bundled = state.range(1) != 0;
  const SevenBFfn f(type, 2);
  ThreadPool pool(static_cast<int>(state.range(2)));
  std::vector<float> gate(f.n_ff), up(f.n_ff);
  int64_t bytes = 0, c = 0, pass = 0;
  for (auto _ : state) {
    const MatrixView g = f.view(c, 0, bundled), v = f.view(c, 1, bundled);
    const GatherJob jobs[2] = {{&g, gate.data(), f.n_ff}, {&v, up.data(), f.n_ff}};
    const std::vector<int32_t>& list = f.lists[static_cast<size_t>(pass % kLists)];
    gather_matmat(f.k, jobs, list, std::span(&f.in, 1), pool);
    benchmark::DoNotOptimize(gate.data());
    benchmark::DoNotOptimize(up.data());
    bytes += static_cast<int64_t>(2 * list.size() * f.rb);
    c = (c + 1) % f.layers;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::string(dtype_name(type)) + (bundled ? " bundled " : " separate ") + f.k.name);
}

BENCHMARK(BM_GatherGateUp)
    ->ArgsProduct({{static_cast<int64_t>(DType::Q4_0), static_cast<int64_t>(DType::Q8_0),
                    static_cast<int64_t>(DType::F16)},
                   {0, 1},
                   {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// One token's whole sparse FFN on the 7B shape (gate, up and down_t of n_ff 11008 x n_embd
// 4096), 14% of neurons selected (the 7B predictors' density) and 70% of those non-zero after
// the activation (their precision): gather_matmat, activation, axpy_rows, with the three
// matrices separate (as in the file) or bundled (each neuron's gate, up and down_t rows back to
// back, the flash tier's layout). >= 3 GiB of layers, a different neuron list per pass. GB/s of
// the rows a token needs (gate and up of the selected neurons, down_t of the non-zero ones).
// (A fused one-pass variant, gate/up/activation/down per four neurons, measured no faster:
// docs/SPARSITY.md, session 6.)
void keep_seven_of_ten(const float* up, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = i % 10 < 7 ? up[i] : 0.0f;
}

void BM_SparseFfn(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const bool bundled = state.range(1) != 0;
  const SevenBFfn f(type, 3);
  ThreadPool pool(static_cast<int>(state.range(2)));
  std::vector<float> gate(f.n_ff), up(f.n_ff), h(f.n_ff), out(f.n_embd);
  int64_t bytes = 0, c = 0, pass = 0;
  for (auto _ : state) {
    const MatrixView g = f.view(c, 0, bundled), u = f.view(c, 1, bundled),
                     d = f.view(c, 2, bundled);
    const std::vector<int32_t>& ids = f.lists[static_cast<size_t>(pass % kLists)];
    const int64_t n = static_cast<int64_t>(ids.size());
    const GatherJob jobs[2] = {{&u, up.data(), f.n_ff}, {&g, gate.data(), f.n_ff}};
    gather_matmat(f.k, jobs, ids, std::span(&f.in, 1), pool);
    keep_seven_of_ten(up.data(), h.data(), n);
    uint64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) nonzero += h[i] != 0.0f;
    axpy_rows(f.k, d, ids, h.data(), f.n_ff, 1, out.data(), f.n_embd, pool);
    benchmark::DoNotOptimize(out.data());
    bytes += static_cast<int64_t>((2 * ids.size() + nonzero) * f.rb);
    c = (c + 1) % f.layers;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::string(dtype_name(type)) + (bundled ? " bundled " : " separate ") + f.k.name);
}

BENCHMARK(BM_SparseFfn)
    ->ArgsProduct({{static_cast<int64_t>(DType::Q4_0), static_cast<int64_t>(DType::Q8_0)},
                   {0, 1},
                   {2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The ceiling of the sparse operators: reading scattered rows and nothing else. Rows of
// `row_bytes` (2304: a 7B Q4_0 row; 4352: Q8_0; 6912: a Q4_0 gate/up/down bundle), 14% of
// 11008 per layer, ascending, >= 3 GiB of layers with a different list per pass, one 256-bit
// add per 32 bytes (so few instructions per line that out-of-order execution alone runs far
// ahead); with `prefetch`, each line of a row requests the same line of the next row (as the
// operators do). Threads split the list as the pool does. GB/s of the rows read.
__attribute__((target("avx2"))) uint64_t sum_rows(const uint8_t* base, const int32_t* ids,
                                                  int64_t n, int64_t rb, bool prefetch) {
  __m256i acc = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = base + ids[i] * rb;
    const uint8_t* next = i + 1 < n ? base + ids[i + 1] * rb : nullptr;
    for (int64_t off = 0; off + 64 <= rb; off += 64) {
      if (prefetch && next != nullptr)
        _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T0);
      const __m256i* p = reinterpret_cast<const __m256i*>(row + off);
      acc =
          _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1)));
    }
  }
  return static_cast<uint64_t>(_mm256_extract_epi64(acc, 0));
}

void BM_ScatteredRows(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int64_t rb = state.range(0);
  const bool prefetch = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  const int64_t n_ff = 11008, layer = n_ff * rb;
  const int64_t layers = (kSparseBytes + layer - 1) / layer;
  HugePageBuffer buf;
  buf.resize(static_cast<size_t>(layers * layer));
  std::memset(buf.data(), 1, static_cast<size_t>(layers * layer));
  const auto lists = random_lists(std::vector<double>(n_ff, 0.14), 3);
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8, 0);
  int64_t bytes = 0, pass = 0;
  for (auto _ : state) {
    const uint8_t* base = buf.data() + (pass % layers) * layer;
    const std::vector<int32_t>& ids = lists[static_cast<size_t>(pass % kLists)];
    const int64_t n = static_cast<int64_t>(ids.size());
    pool.parallel_for(n, [&](int64_t i0, int64_t i1, int t) {
      sums[static_cast<size_t>(t) * 8] += sum_rows(base, ids.data() + i0, i1 - i0, rb, prefetch);
    });
    benchmark::DoNotOptimize(sums.data());
    bytes += n * rb;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::to_string(rb) + "-byte rows" + (prefetch ? " next-row prefetch" : ""));
}

BENCHMARK(BM_ScatteredRows)
    ->ArgsProduct({{2304, 4352, 6912}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// TEAL's input-sparse product on the 7B attention shape (4096 x 4096): the dense matrix-vector
// product of the row-major matrix (density 1000), or axpy_rows over its column-major copy at the
// given per-mille density of the input (the columns read). >= 3 GiB of copies and a different
// random column list per pass. GB/s of the bytes read: the input-sparse path pays off only when
// this is close to the dense figure.
// Q8_0's and the K-quants' column copies are column groups (model/column_group_copy.h): one built
// from a random n x n matrix, repeated to >= kSparseBytes; the view of the first.
Matrix make_group_copies(DType type, int64_t n, int64_t& copies) {
  const Matrix one = make(type, n, n);
  const uint64_t copy_bytes = column_groups_copy_bytes(std::span(&one.view, 1));
  copies = static_cast<int64_t>((kSparseBytes + copy_bytes - 1) / copy_bytes);
  Matrix m;
  m.bytes.resize(static_cast<size_t>(copy_bytes * static_cast<uint64_t>(copies)));
  m.view = build_column_groups(std::span(&one.view, 1), m.bytes.data());
  for (int64_t c = 1; c < copies; ++c)
    std::memcpy(m.bytes.data() + static_cast<uint64_t>(c) * copy_bytes, m.bytes.data(),
                static_cast<size_t>(copy_bytes));
  return m;
}

void BM_InputColumns(benchmark::State& state) {
  const auto type = static_cast<DType>(state.range(0));
  const int64_t per_mille = state.range(1);
  const bool dense = per_mille >= 1000;
  const bool groups = !dense && has_column_groups(type);
  const int64_t n = 4096;
  int64_t copies = 0;
  Matrix m = groups ? make_group_copies(type, n, copies) : make_copies(type, n, n, copies);
  if (dense && interleavable(type)) {
    m.view.rows = n * copies;
    interleave_rows16(type, m.bytes.data(), m.view.rows, n);
    m.view.layout = Layout::Interleaved16;
  }
  const auto lists = random_lists(std::vector<double>(n, per_mille / 1000.0), 11);
  std::vector<float> x(n, 0.5f), coef(n, 0.25f), out(n);
  const CpuKernels& k = best_kernels();
  ThreadPool pool(static_cast<int>(state.range(2)));
  int64_t bytes = 0, c = 0, pass = 0;
  for (auto _ : state) {
    MatrixView part = m.view;
    part.data += static_cast<uint64_t>(c) * n * m.view.row_bytes;
    part.rows = n;
    if (dense) {
      matvec(k, part, x.data(), out.data(), pool);
      bytes += static_cast<int64_t>(part.bytes());
    } else {
      const std::vector<int32_t>& list = lists[static_cast<size_t>(pass % kLists)];
      axpy_rows(k, part, list, coef.data(), n, 1, out.data(), n, pool);
      bytes += static_cast<int64_t>(list.size() * part.row_bytes);
    }
    benchmark::DoNotOptimize(out.data());
    c = (c + 1) % copies;
    ++pass;
  }
  state.SetBytesProcessed(bytes);
  state.SetLabel(std::string(dtype_name(type)) + (dense ? " dense matvec " : " columns ") +
                 kernels_label(k));
}

BENCHMARK(BM_InputColumns)
    ->ArgsProduct({{static_cast<int64_t>(DType::F16), static_cast<int64_t>(DType::Q8_0),
                    static_cast<int64_t>(DType::Q4_K), static_cast<int64_t>(DType::Q5_K),
                    static_cast<int64_t>(DType::Q6_K)},
                   {400, 500, 1000},
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
