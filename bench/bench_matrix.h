// Weight matrices for the microbenchmarks: huge-page buffers of random rows, and for the sparse
// operators >= 3 GiB of copies with random row lists (so they measure RAM, not L3).
#pragma once

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/matrix.h"
#include "tensor/quantize.h"

namespace strata::bench {

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

inline Matrix make(DType type, int64_t rows, int64_t cols) {
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

// Sparse operators read a few rows of matrices far larger than the caches. This VM reports a
// 480 MB L3, so a benchmark that cycles over a few hundred MB with fixed row lists measures L3,
// not RAM (sessions 3-5 did: the Q4_0 gate/up gather read 27.7 GB/s with 84 MB of rows touched
// per cycle and 14.5 GB/s with 336 MB). So: `copies` of an FFN matrix totalling >= 3 GiB (one
// copy quantized, the rest memcpy'd), and a different random row list (from a pool of kLists)
// on every pass, so the rows touched over time cover the whole 3 GiB and at most a sixth of
// them can be in L3.
constexpr int64_t kSparseBytes = int64_t{3} << 30;
constexpr int kLists = 509;  // prime: the (copy, list) pairs do not repeat in step

inline Matrix make_copies(DType type, int64_t rows, int64_t cols, int64_t& copies) {
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
inline std::vector<std::vector<int32_t>> random_lists(const std::vector<double>& p, uint32_t seed) {
  std::vector<std::vector<int32_t>> lists(kLists);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& list : lists)
    for (int32_t i = 0; i < static_cast<int32_t>(p.size()); ++i)
      if (u(rng) < p[static_cast<size_t>(i)]) list.push_back(i);
  return lists;
}

}  // namespace strata::bench
