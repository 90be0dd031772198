// Weight products: one warp per output row (matmul, gather), lanes over 16-value units in a
// fixed order and a butterfly across lanes; the axpy with one thread per output column and
// bucket, partials added in bucket order by a second kernel; rows to f16 for cuBLAS.
#include <algorithm>
#include <string>

#include "backends/cuda/block_math.h"
#include "backends/cuda/launch.h"

namespace strata::STRATA_CUDA_NS {

namespace {

using cuda_math::axpy_weight;
using cuda_math::Decode;
using cuda_math::kUnit;

constexpr int kWarpsPerBlock = 4;

__device__ inline float warp_sum(float v) {
  // The order lane_tree_sum mirrors: xor 16, 8, 4, 2, 1.
  for (int step = 16; step > 0; step /= 2) v += __shfl_xor_sync(0xffffffffu, v, step);
  return v;
}

template <DType T>
__global__ void products_kernel(const uint8_t* w, uint64_t row_bytes, int64_t cols,
                                const int32_t* ids, int64_t count, const float* x, int64_t n,
                                const uint8_t* need, int64_t need_stride, float* y,
                                int64_t y_stride) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTile;
  if (k >= count) return;
  const int nt = static_cast<int>(n - t0 < kTile ? n - t0 : kTile);
  const int64_t r = ids != nullptr ? ids[k] : k;
  const uint8_t* row = w + static_cast<uint64_t>(r) * row_bytes;
  const float* xs = x + t0 * cols;
  const int64_t units = cols / kUnit;
  float acc[kTile];
#pragma unroll
  for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
  for (int64_t u = lane; u < units; u += 32) {
    float v[kUnit];
    Decode<T>::unit(row, u, v);
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (t < nt) {
        const float* xt = xs + t * cols + u * kUnit;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kUnit; ++i) s += v[i] * __ldg(xt + i);
        acc[t] += s;
      }
    }
  }
  // Float rows whose length is not a multiple of 16: the tail, one value per lane.
  for (int64_t j = units * kUnit + lane; j < cols; j += 32) {
    const float v = Decode<T>::value(row, j);
#pragma unroll
    for (int t = 0; t < kTile; ++t)
      if (t < nt) acc[t] += v * __ldg(xs + t * cols + j);
  }
  // Only the tile's tokens (nt is the same for the whole warp, so its lanes branch together).
#pragma unroll
  for (int t = 0; t < kTile; ++t)
    if (t < nt) acc[t] = warp_sum(acc[t]);
  if (lane != 0) return;
  for (int t = 0; t < nt; ++t) {
    const int64_t b = t0 + t;
    const bool wanted = need == nullptr || need[b * need_stride + k] != 0;
    y[b * y_stride + k] = wanted ? acc[t] : 0.0f;
  }
}

// First index in ids[lo, hi) whose id is >= v (ids ascending there).
__device__ inline int64_t lower_bound(const int32_t* ids, int64_t lo, int64_t hi, int64_t v) {
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (ids[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The axpy's list as ascending runs: split[0] = where the second run starts (count when the
// list is ascending). One block; a third run traps (the contract allows two).
__global__ void run_split_kernel(const int32_t* ids, int64_t count, int64_t* split) {
  __shared__ int descents;
  __shared__ unsigned long long first;
  if (threadIdx.x == 0) {
    descents = 0;
    first = static_cast<unsigned long long>(count);
  }
  __syncthreads();
  for (int64_t k = 1 + threadIdx.x; k < count; k += blockDim.x)
    if (ids[k] < ids[k - 1]) {
      atomicAdd(&descents, 1);
      atomicMin(&first, static_cast<unsigned long long>(k));
    }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (descents > 1) __trap();  // more than two ascending runs: a caller's bug
    split[0] = static_cast<int64_t>(first);
  }
}

// partial[(bucket * nt + t) * cols + j]: bucket `blockIdx.y`'s sum for token t, column j: its
// terms of the first run, then of the second, each in list order.
template <DType T>
__global__ void axpy_partial_kernel(const uint8_t* wt, uint64_t row_bytes, int64_t cols,
                                    bool column_groups, const int32_t* rows, const int32_t* neurons,
                                    int64_t count, const int64_t* split, const float* c,
                                    int64_t c_stride, int nt, float* partial) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t bucket = blockIdx.y;
  const int32_t* ids = neurons != nullptr ? neurons : rows;
  const int64_t mid = split[0];
  const int64_t runs[2][2] = {{lower_bound(ids, 0, mid, bucket * kBucket),
                               lower_bound(ids, 0, mid, (bucket + 1) * kBucket)},
                              {lower_bound(ids, mid, count, bucket * kBucket),
                               lower_bound(ids, mid, count, (bucket + 1) * kBucket)}};
  float acc[kTile];
#pragma unroll
  for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
  if (j < cols) {
    for (int r = 0; r < 2; ++r)
      for (int64_t k = runs[r][0]; k < runs[r][1]; ++k) {
        float coef[kTile];
        bool any = false;
#pragma unroll
        for (int t = 0; t < kTile; ++t) {
          coef[t] = t < nt ? c[t * c_stride + k] : 0.0f;
          any = any || coef[t] != 0.0f;
        }
        if (!any) continue;  // the row is not read
        const float v = axpy_weight<T>(wt, row_bytes, cols, column_groups, rows[k], j);
#pragma unroll
        for (int t = 0; t < kTile; ++t)
          if (coef[t] != 0.0f) acc[t] += coef[t] * v;
      }
    for (int t = 0; t < nt; ++t) partial[(bucket * nt + t) * cols + j] = acc[t];
  }
}

__global__ void axpy_sum_kernel(const float* partial, int64_t buckets, int nt, int64_t cols,
                                float* out, int64_t out_stride) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (j >= cols) return;
  float s = 0.0f;
  for (int64_t b = 0; b < buckets; ++b) s += partial[(b * nt + t) * cols + j];
  out[t * out_stride + j] = s;
}

template <DType T>
__global__ void rows_to_half_kernel(const uint8_t* w, uint64_t row_bytes, int64_t cols,
                                    int64_t row0, int64_t rows, __half* out) {
  const int64_t units = cols / kUnit;
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= rows * units) return;
  const int64_t r = at / units, u = at % units;
  float v[kUnit];
  Decode<T>::unit(w + static_cast<uint64_t>(row0 + r) * row_bytes, u, v);
  for (int i = 0; i < kUnit; ++i) out[r * cols + u * kUnit + i] = __float2half_rn(v[i]);
}

constexpr int kRowThreads = 256;

// One block per row: the row's largest magnitude by a fixed tree, its scale, the scaled values.
__global__ void rows_to_scaled_half_kernel(const float* x, int64_t dim, __half* out,
                                           float* scales) {
  __shared__ float most[kRowThreads];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  __half* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  float m = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kRowThreads) m = fmaxf(m, fabsf(xr[i]));
  most[threadIdx.x] = m;
  __syncthreads();
  for (unsigned w = kRowThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) most[threadIdx.x] = fmaxf(most[threadIdx.x], most[threadIdx.x + w]);
    __syncthreads();
  }
  const float scale = cuda_math::half_input_scale(most[0]);
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  const float inverse = 1.0f / scale;  // a power of two: exact
  for (int64_t i = threadIdx.x; i < dim; i += kRowThreads) o[i] = __float2half_rn(xr[i] * inverse);
}

__global__ void scale_rows_kernel(float* y, int64_t rows, int64_t y_stride, const float* scales) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t b = blockIdx.y;
  if (r < rows) y[b * y_stride + r] *= scales[b];
}

__global__ void zero_rows_kernel(float* out, int64_t cols, int64_t out_stride) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < cols) out[static_cast<int64_t>(blockIdx.y) * out_stride + j] = 0.0f;
}

// Calls f.template operator()<T>() for the weight type.
template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      return f.template operator()<DType::F32>();
    case DType::F16:
      return f.template operator()<DType::F16>();
    case DType::BF16:
      return f.template operator()<DType::BF16>();
    case DType::Q8_0:
      return f.template operator()<DType::Q8_0>();
    case DType::Q4_0:
      return f.template operator()<DType::Q4_0>();
    case DType::Q2_K:
      return f.template operator()<DType::Q2_K>();
    case DType::Q3_K:
      return f.template operator()<DType::Q3_K>();
    case DType::Q4_K:
      return f.template operator()<DType::Q4_K>();
    case DType::Q5_K:
      return f.template operator()<DType::Q5_K>();
    case DType::Q6_K:
      return f.template operator()<DType::Q6_K>();
    default:
      if (!is_unit_type(t))
        kernel_failure(std::string("the CUDA backend has no kernels for ") + dtype_name(t) +
                       " weights");
      return with_unit_type(t, f);
  }
}

unsigned blocks_for(int64_t count, int per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

}  // namespace

void launch_products(const Rows& w, const int32_t* ids, int64_t count, const float* x, int64_t n,
                     const uint8_t* need, int64_t need_stride, float* y, int64_t y_stride,
                     cudaStream_t stream) {
  if (count == 0 || n == 0) return;
  const dim3 grid(blocks_for(count, kWarpsPerBlock), blocks_for(n, kTile));
  with_type(w.type, [&]<DType T>() {
    STRATA_LAUNCH(products_kernel<T>, grid, 32 * kWarpsPerBlock, stream, w.data, w.row_bytes,
                  w.cols, ids, count, x, n, need, need_stride, y, y_stride);
  });
  check_launch("products", stream);
}

void launch_axpy(const Rows& wt, const int32_t* rows, const int32_t* neurons, int64_t id_bound,
                 int64_t count, const float* c, int64_t c_stride, int64_t n, float* out,
                 int64_t out_stride, float* partial, uint64_t partial_bytes, cudaStream_t stream) {
  if (n == 0 || wt.cols == 0) return;
  constexpr int kThreads = 256;
  const int64_t buckets = (id_bound + kBucket - 1) / kBucket;
  if (count == 0 || buckets == 0) {  // no terms: every token's sum is 0
    for (int64_t t0 = 0; t0 < n; t0 += 65535) {
      const unsigned nt = static_cast<unsigned>(std::min<int64_t>(65535, n - t0));
      STRATA_LAUNCH(zero_rows_kernel, dim3(blocks_for(wt.cols, kThreads), nt), kThreads, stream,
                    out + t0 * out_stride, wt.cols, out_stride);
    }
    check_launch("axpy", stream);
    return;
  }
  if (partial_bytes <= kAxpyReserved) kernel_failure("the CUDA axpy has no scratch");
  auto* split = reinterpret_cast<int64_t*>(reinterpret_cast<uint8_t*>(partial) + partial_bytes -
                                           kAxpyReserved);
  const uint64_t per_token = static_cast<uint64_t>(buckets * wt.cols) * sizeof(float);
  const int64_t pass =
      std::min<int64_t>(kTile, static_cast<int64_t>((partial_bytes - kAxpyReserved) / per_token));
  if (pass < 1)
    kernel_failure("the CUDA axpy's scratch cannot hold one token of " + std::to_string(wt.cols) +
                   " columns");
  STRATA_LAUNCH(run_split_kernel, 1, kThreads, stream, neurons != nullptr ? neurons : rows, count,
                split);
  for (int64_t t0 = 0; t0 < n; t0 += pass) {
    const int nt = static_cast<int>(std::min(pass, n - t0));
    const dim3 grid(blocks_for(wt.cols, kThreads), static_cast<unsigned>(buckets));
    with_type(wt.type, [&]<DType T>() {
      STRATA_LAUNCH(axpy_partial_kernel<T>, grid, kThreads, stream, wt.data, wt.row_bytes, wt.cols,
                    wt.column_groups, rows, neurons, count, split, c + t0 * c_stride, c_stride, nt,
                    partial);
    });
    STRATA_LAUNCH(axpy_sum_kernel, dim3(blocks_for(wt.cols, kThreads), static_cast<unsigned>(nt)),
                  kThreads, stream, partial, buckets, nt, wt.cols, out + t0 * out_stride,
                  out_stride);
    check_launch("axpy", stream);
  }
}

void launch_rows_to_half(const Rows& w, int64_t row0, int64_t rows, uint16_t* out,
                         cudaStream_t stream) {
  const int64_t units = rows * (w.cols / kUnit);
  if (units == 0) return;
  with_type(w.type, [&]<DType T>() {
    STRATA_LAUNCH(rows_to_half_kernel<T>, blocks_for(units, 256), 256, stream, w.data, w.row_bytes,
                  w.cols, row0, rows, reinterpret_cast<__half*>(out));
  });
  check_launch("rows to f16", stream);
}

void launch_rows_to_scaled_half(const float* x, int64_t n, int64_t dim, uint16_t* out,
                                float* scales, cudaStream_t stream) {
  if (n == 0 || dim == 0) return;
  STRATA_LAUNCH(rows_to_scaled_half_kernel, static_cast<unsigned>(n), kRowThreads, stream, x, dim,
                reinterpret_cast<__half*>(out), scales);
  check_launch("activations to f16", stream);
}

void launch_scale_rows(float* y, int64_t n, int64_t rows, int64_t y_stride, const float* scales,
                       cudaStream_t stream) {
  if (n == 0 || rows == 0) return;
  STRATA_LAUNCH(scale_rows_kernel, dim3(blocks_for(rows, 256), static_cast<unsigned>(n)), 256,
                stream, y, rows, y_stride, scales);
  check_launch("scale rows", stream);
}

}  // namespace strata::STRATA_CUDA_NS
