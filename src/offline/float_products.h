// Products of row-major F32 matrices for offline training (the predictors' forward and backward
// passes): C = A . B^T through the CPU kernels' token lanes, the weight side split over the
// pool. Every element is one dot product summed in column order, so results do not depend on
// the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"

namespace strata {

// c[m * n + j] = a[m] . b[j] for a (m x k) and b (n x k), both row-major; c is resized to m x n.
void multiply_abt(const CpuKernels& kernels, ThreadPool& pool, const float* a, int64_t m,
                  const float* b, int64_t n, int64_t k, std::vector<float>& c);

// c = (A . B)^T: c[j * m + i] = a[i] . (column j of b) for a (m x k) and b (k x n), both
// row-major (B's columns go into the token lanes as they lie, untransposed); c is resized to
// n x m.
void multiply_ab_transposed(const CpuKernels& kernels, ThreadPool& pool, const float* a,
                            int64_t m, const float* b, int64_t n, int64_t k,
                            std::vector<float>& c);

// dst (cols x rows) = src (rows x cols) transposed, bands of rows split over the pool; dst is
// resized.
void transpose(ThreadPool& pool, const float* src, int64_t rows, int64_t cols,
               std::vector<float>& dst);

}  // namespace strata
