// The rest of a layer: RMSNorm (one block per row, sums in double by a fixed tree), RoPE with
// the KV append, attention (one block per token and head: scores by warps, softmax and the
// value sums by fixed loops), activations and elementwise ops, and the neuron selection
// (the union of a batch's neurons compacted by one block's prefix sum).
#include <string>

#include "backends/cuda/block_math.h"
#include "backends/cuda/launch.h"
#include "tensor/block_quant_math.h"
#include "tensor/expert_mix.h"
#include "tensor/input_sparsity.h"

namespace strata::STRATA_CUDA_NS {

namespace {

using cuda_math::activate;
using cuda_math::attention_score;
using cuda_math::float_to_half;
using cuda_math::half_to_float;
using cuda_math::rope_first;
using cuda_math::rope_second;
using cuda_math::rotate_pair;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count, int per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

__device__ inline float warp_sum(float v) {
  for (int step = 16; step > 0; step /= 2) v += __shfl_xor_sync(0xffffffffu, v, step);
  return v;
}

__global__ void rms_norm_kernel(const float* x, const float* weight, float* out, int64_t dim,
                                float eps) {
  __shared__ double part[kThreads];
  const float* xb = x + blockIdx.x * dim;
  float* ob = out + blockIdx.x * dim;
  double s = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) s += double{xb[i]} * xb[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const float scale = static_cast<float>(1.0 / sqrt(part[0] / static_cast<double>(dim) + eps));
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ob[i] = xb[i] * scale * weight[i];
}

// Sums of a block's threads' values in double by the fixed tree of rms_norm_kernel.
__device__ inline double block_sum(double* part, double v) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the next sum
  return total;
}

// One block per row: the mean, then the variance around it (both in double), then the row.
__global__ void layer_norm_kernel(const float* x, const float* weight, const float* bias,
                                  float* out, int64_t dim, float eps) {
  __shared__ double part[kThreads];
  const float* xb = x + blockIdx.x * dim;
  float* ob = out + blockIdx.x * dim;
  double s = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) s += xb[i];
  const double mean = block_sum(part, s) / static_cast<double>(dim);
  double v = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) v += (xb[i] - mean) * (xb[i] - mean);
  const double var = block_sum(part, v) / static_cast<double>(dim);
  const float scale = static_cast<float>(1.0 / sqrt(var + eps));
  const float m = static_cast<float>(mean);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads)
    ob[i] = (xb[i] - m) * scale * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t count, int64_t dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += bias[i % dim];
}

__global__ void add_bias_of_kernel(float* y, const float* bias, const int32_t* ids, int64_t count,
                                   int64_t n, int64_t stride) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * n) return;
  const int64_t b = i / count, k = i % count;
  y[b * stride + k] += bias[ids[k]];
}

__device__ inline bool block_cache(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0;
}

// A KV row of `count` values at element `at` of the cache (F32, F16, or Q8_0/Q4_0 blocks,
// quantized as the CPU does: tensor/block_quant_math.h), by the block's threads.
__device__ inline void store_row(void* cache, DType type, int64_t at, const float* x,
                                 int64_t count) {
  if (block_cache(type)) {
    const uint64_t block_bytes = type == DType::Q8_0 ? 34 : 18;
    uint8_t* first = static_cast<uint8_t*>(cache) + static_cast<uint64_t>(at / kQK) * block_bytes;
    for (int64_t b = threadIdx.x; b < count / kQK; b += blockDim.x) {
      if (type == DType::Q8_0)
        quantize_block_q8_0(x + b * kQK, first + b * block_bytes);
      else
        quantize_block_q4_0(x + b * kQK, first + b * block_bytes);
    }
    return;
  }
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    if (type == DType::F16)
      static_cast<uint16_t*>(cache)[at + i] = float_to_half(x[i]);
    else
      static_cast<float*>(cache)[at + i] = x[i];
  }
}

__device__ inline float load_value(const void* cache, DType type, int64_t at) {
  if (type == DType::F16) return half_to_float(static_cast<const uint16_t*>(cache)[at]);
  if (type == DType::F32) return static_cast<const float*>(cache)[at];
  return block_value(type, static_cast<const uint8_t*>(cache), at);
}

// One block per token: rotate its query and key heads' first `half` pairs, then store its key
// and value at its cache row.
__global__ void rope_store_kernel(float* q, float* k, const float* v, int n_head, int n_head_kv,
                                  int head_dim, const float* cos, const float* sin, int half,
                                  bool neox, void* k_cache, void* v_cache, DType k_type,
                                  DType v_type, int64_t kv_dim, Places at) {
  const int b = blockIdx.x;
  const int64_t q_dim = static_cast<int64_t>(n_head) * head_dim;
  const int64_t k_dim =
      static_cast<int64_t>(n_head_kv) * head_dim;  // a k or v row; kv_dim: the cache's
  float* qb = q + b * q_dim;
  float* kb = k + b * k_dim;
  const float* cb = cos + static_cast<int64_t>(b) * half;
  const float* sb = sin + static_cast<int64_t>(b) * half;
  for (int idx = threadIdx.x; idx < n_head * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* head = qb + h * head_dim;
    rotate_pair(head[rope_first(neox, i)], head[rope_second(neox, i, half)], cb[i], sb[i]);
  }
  for (int idx = threadIdx.x; idx < n_head_kv * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* head = kb + h * head_dim;
    rotate_pair(head[rope_first(neox, i)], head[rope_second(neox, i, half)], cb[i], sb[i]);
  }
  __syncthreads();
  const int64_t row = (at.base[b] + at.pos[b]) * kv_dim;
  store_row(k_cache, k_type, row, kb, k_dim);
  store_row(v_cache, v_type, row, v + b * k_dim, k_dim);
}

// Block (head h, token b): scores of the token's query head against its sequence's cached
// keys up to its position, softmax, the weighted sum of values.
__global__ void attention_kernel(const float* q, int n_head, int group, int head_dim,
                                 const void* k_cache, const void* v_cache, DType k_type,
                                 DType v_type, int64_t kv_dim, Places at, int64_t n_ctx, float* scores,
                                 float* out, float scale, float softcap, const float* sinks) {
  __shared__ float qs[512];
  __shared__ float red[kThreads];
  const int h = blockIdx.x, b = blockIdx.y, kvh = h / group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x / 32;
  const int64_t q_dim = static_cast<int64_t>(n_head) * head_dim;
  const int64_t positions = at.pos[b] + 1, base = at.base[b];
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) qs[i] = q[b * q_dim + h * head_dim + i];
  __syncthreads();
  float* sc = scores + (static_cast<int64_t>(b) * n_head + h) * n_ctx;
  const int64_t head = static_cast<int64_t>(kvh) * head_dim;
  for (int64_t p = warp; p < positions; p += warps) {
    const int64_t row = (base + p) * kv_dim + head;
    float d = 0.0f;
    for (int i = lane; i < head_dim; i += 32) d += qs[i] * load_value(k_cache, k_type, row + i);
    d = warp_sum(d);
    if (lane == 0) sc[p] = attention_score(d, scale, softcap);
  }
  __syncthreads();
  float most = -INFINITY;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) most = fmaxf(most, sc[p]);
  red[threadIdx.x] = most;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  // A sink joins the maximum and, below, the denominator.
  const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
  most = fmaxf(red[0], sink);
  __syncthreads();
  float total = 0.0f;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
    const float e = expf(sc[p] - most);
    sc[p] = e;
    total += e;
  }
  red[threadIdx.x] = total;
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  total = red[0] + (sink == -INFINITY ? 0.0f : expf(sink - most));
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int64_t p = 0; p < positions; ++p)
      acc += sc[p] * load_value(v_cache, v_type, (base + p) * kv_dim + head + i);
    out[b * q_dim + h * head_dim + i] = acc / total;
  }
}

__global__ void activation_kernel(FfnActivation act, const float* gate, const float* up, float* h,
                                  int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) h[i] = activate(act, gate != nullptr ? gate[i] : 0.0f, up[i]);
}

__global__ void relu_kernel(float* x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count && x[i] < 0.0f) x[i] = 0.0f;
}

__global__ void threshold_kernel(const float* s, float t, bool strict, uint8_t* mask,
                                 int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) mask[i] = strict ? s[i] > t : s[i] >= t;
}

__global__ void add_kernel(float* x, const float* y, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += y[i];
}

__global__ void scale_kernel(float* x, float factor, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] *= factor;
}

// One thread per output value: mix_value over the token's k expert outputs.
__global__ void mix_experts_kernel(const float* y, const float* weights, int64_t n, int64_t k,
                                   int64_t dim, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t b = i / dim, j = i % dim;
  out[i] = mix_value(y + b * k * dim + j, weights + b * k, k, dim);
}

// One thread per mask entry: cleared where the token's weight of the neuron's expert is 0.
__global__ void mask_unchosen_kernel(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                                     int64_t expert_ff, int64_t n_expert) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * stride) return;
  const int64_t b = i / stride;
  if (neuron_expert_weight(weights + b * n_expert, i % stride, expert_ff) == 0.0f) mask[i] = 0;
}

// One thread per listed value: scaled by the token's weight of the neuron's expert.
__global__ void scale_by_expert_kernel(float* h, const int32_t* ids, int64_t count,
                                       const float* weights, int64_t n, int64_t stride,
                                       int64_t expert_ff, int64_t n_expert) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * n) return;
  const int64_t b = i / count, k = i % count;
  h[b * stride + k] *= neuron_expert_weight(weights + b * n_expert, ids[k], expert_ff);
}

constexpr int kScanThreads = 1024;

// One block: thread t owns neurons [t * chunk, (t + 1) * chunk); counts its selected ones,
// a prefix sum gives its first slot, it writes its ids in ascending order.
__global__ void union_ids_kernel(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids,
                                 int64_t* counts) {
  __shared__ int64_t sums[kScanThreads];
  const int64_t chunk = (ff + kScanThreads - 1) / kScanThreads;
  const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < ff ? lo + chunk : ff;
  auto selected = [&](int64_t i) {
    for (int64_t b = 0; b < n; ++b)
      if (mask[b * ff + i] != 0) return true;
    return false;
  };
  int64_t mine = 0;
  for (int64_t i = lo; i < hi; ++i) mine += selected(i);
  sums[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned off = 1; off < kScanThreads; off *= 2) {
    const int64_t add = threadIdx.x >= off ? sums[threadIdx.x - off] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int64_t slot = sums[threadIdx.x] - mine;
  for (int64_t i = lo; i < hi; ++i)
    if (selected(i)) ids[slot++] = static_cast<int32_t>(i);
  if (threadIdx.x == kScanThreads - 1) counts[0] = sums[threadIdx.x];
}

// need[b * ff + k] = mask[b][ids[k]] for k < count; counts[1] += the selected pairs.
__global__ void union_need_kernel(const uint8_t* mask, int64_t n, int64_t ff, const int32_t* ids,
                                  uint8_t* need, int64_t* counts) {
  __shared__ int block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t count = counts[0];
  if (at < n * ff) {
    const int64_t b = at / ff, k = at % ff;
    if (k < count) {
      const uint8_t v = mask[b * ff + ids[k]];
      need[b * ff + k] = v;
      if (v != 0) atomicAdd(&block_sum, 1);  // integers: the total is exact in any order
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_sum != 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(counts + 1),
              static_cast<unsigned long long>(block_sum));
}

__global__ void select_columns_kernel(const float* full, const int32_t* ids, int64_t count,
                                      int64_t n, int64_t stride, float* out) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= n * count) return;
  const int64_t b = at / count, k = at % count;
  out[b * stride + k] = full[b * stride + ids[k]];
}

__global__ void keep_needed_kernel(float* h, const uint8_t* need, int64_t n, int64_t stride,
                                   int64_t begin, int64_t width, unsigned long long* nonzero) {
  __shared__ int block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at < n * width) {
    const int64_t i = (at / width) * stride + begin + at % width;
    if (need != nullptr && need[i] == 0) h[i] = 0.0f;
    if (h[i] != 0.0f) atomicAdd(&block_sum, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_sum != 0)
    atomicAdd(nonzero, static_cast<unsigned long long>(block_sum));
}

__global__ void sparsify_kernel(float* x, int64_t count, float threshold, bool gate,
                                FfnActivation act, unsigned long long* kept, uint8_t* mask) {
  __shared__ int block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) {
    const float v = gate ? cats_keep(act, x[i], threshold) : teal_keep(x[i], threshold);
    x[i] = v;
    if (mask != nullptr) mask[i] = v != 0.0f;
    if (v != 0.0f) atomicAdd(&block_sum, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_sum != 0)
    atomicAdd(kept, static_cast<unsigned long long>(block_sum));
}

__global__ void read_kernel(const float4* p, int64_t n4, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float4 s = make_float4(0, 0, 0, 0);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += stride) {
    const float4 v = __ldg(p + i);
    s.x += v.x;
    s.y += v.y;
    s.z += v.z;
    s.w += v.w;
  }
  out[static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x] = s.x + s.y + s.z + s.w;
}

}  // namespace

void launch_read(const float* p, int64_t count, float* out, int blocks, int threads,
                 cudaStream_t stream) {
  STRATA_LAUNCH(read_kernel, blocks, threads, stream, reinterpret_cast<const float4*>(p), count / 4,
                out);
  check_launch("read", stream);
}

void launch_rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                     float eps, cudaStream_t stream) {
  if (n == 0) return;
  STRATA_LAUNCH(rms_norm_kernel, static_cast<unsigned>(n), kThreads, stream, x, weight, out, dim,
                eps);
  check_launch("rms_norm", stream);
}

void launch_layer_norm(const float* x, const float* weight, const float* bias, float* out,
                       int64_t n, int64_t dim, float eps, cudaStream_t stream) {
  if (n == 0) return;
  STRATA_LAUNCH(layer_norm_kernel, static_cast<unsigned>(n), kThreads, stream, x, weight, bias, out,
                dim, eps);
  check_launch("layer_norm", stream);
}

void launch_add_bias(float* x, const float* bias, int64_t n, int64_t dim, cudaStream_t stream) {
  if (n * dim == 0) return;
  STRATA_LAUNCH(add_bias_kernel, blocks_for(n * dim, kThreads), kThreads, stream, x, bias, n * dim,
                dim);
  check_launch("add_bias", stream);
}

void launch_add_bias_of(float* y, const float* bias, const int32_t* ids, int64_t count, int64_t n,
                        int64_t stride, cudaStream_t stream) {
  if (count * n == 0) return;
  STRATA_LAUNCH(add_bias_of_kernel, blocks_for(count * n, kThreads), kThreads, stream, y, bias, ids,
                count, n, stride);
  check_launch("add_bias_of", stream);
}

void launch_rope_store(float* q, float* k, const float* v, int64_t n, int n_head, int n_head_kv,
                       int head_dim, const float* cos, const float* sin, int half, bool neox,
                       void* k_cache, void* v_cache, DType k_type, DType v_type,
                       int64_t kv_dim, const Places& at, cudaStream_t stream) {
  if (n == 0) return;
  STRATA_LAUNCH(rope_store_kernel, static_cast<unsigned>(n), kThreads, stream, q, k, v, n_head,
                n_head_kv, head_dim, cos, sin, half, neox, k_cache, v_cache, k_type, v_type, kv_dim,
                at);
  check_launch("rope_and_store", stream);
}

void launch_attention(const float* q, int64_t n, int n_head, int n_head_kv, int head_dim,
                      float scale, float softcap, const float* sinks, const void* k_cache,
                      const void* v_cache,
                      DType k_type, DType v_type, int64_t kv_dim, const Places& at, int64_t n_ctx,
                      float* scores, float* out, cudaStream_t stream) {
  if (n == 0) return;
  if (head_dim > 512) kernel_failure("the CUDA attention takes heads of up to 512 values");
  STRATA_LAUNCH(attention_kernel, dim3(static_cast<unsigned>(n_head), static_cast<unsigned>(n)),
                kThreads, stream, q, n_head, n_head / n_head_kv, head_dim, k_cache, v_cache, k_type,
                v_type, kv_dim, at, n_ctx, scores, out, scale, softcap, sinks);
  check_launch("attention", stream);
}

void launch_activation(FfnActivation act, const float* gate, const float* up, float* h,
                       int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(activation_kernel, blocks_for(count, kThreads), kThreads, stream, act, gate, up, h,
                count);
  check_launch("activation", stream);
}

void launch_relu(float* x, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(relu_kernel, blocks_for(count, kThreads), kThreads, stream, x, count);
  check_launch("relu", stream);
}

void launch_threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                      int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(threshold_kernel, blocks_for(count, kThreads), kThreads, stream, scores, threshold,
                strict, mask, count);
  check_launch("threshold", stream);
}

void launch_add(float* x, const float* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(add_kernel, blocks_for(count, kThreads), kThreads, stream, x, y, count);
  check_launch("add", stream);
}

void launch_scale(float* x, float factor, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(scale_kernel, blocks_for(count, kThreads), kThreads, stream, x, factor, count);
  check_launch("scale", stream);
}

void launch_mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                          int64_t expert_ff, int64_t n_expert, cudaStream_t stream) {
  if (n * stride == 0) return;
  STRATA_LAUNCH(mask_unchosen_kernel, blocks_for(n * stride, kThreads), kThreads, stream, mask,
                weights, n, stride, expert_ff, n_expert);
  check_launch("mask_unchosen", stream);
}

void launch_scale_by_expert(float* h, const int32_t* ids, int64_t count, const float* weights,
                            int64_t n, int64_t stride, int64_t expert_ff, int64_t n_expert,
                            cudaStream_t stream) {
  if (count * n == 0) return;
  STRATA_LAUNCH(scale_by_expert_kernel, blocks_for(count * n, kThreads), kThreads, stream, h, ids,
                count, weights, n, stride, expert_ff, n_expert);
  check_launch("scale_by_expert", stream);
}

void launch_mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                        float* out, cudaStream_t stream) {
  if (n * dim == 0) return;
  STRATA_LAUNCH(mix_experts_kernel, blocks_for(n * dim, kThreads), kThreads, stream, y, weights, n,
                k, dim, out);
  check_launch("mix_experts", stream);
}

void launch_select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids, uint8_t* need,
                         int64_t* counts, cudaStream_t stream) {
  STRATA_LAUNCH(union_ids_kernel, 1, kScanThreads, stream, mask, n, ff, ids, counts);
  if (n * ff > 0)
    STRATA_LAUNCH(union_need_kernel, blocks_for(n * ff, kThreads), kThreads, stream, mask, n, ff,
                  ids, need, counts);
  check_launch("select_union", stream);
}

void launch_select_columns(const float* full, const int32_t* ids, int64_t count, int64_t n,
                           int64_t stride, float* out, cudaStream_t stream) {
  if (count * n == 0) return;
  STRATA_LAUNCH(select_columns_kernel, blocks_for(count * n, kThreads), kThreads, stream, full, ids,
                count, n, stride, out);
  check_launch("select_columns", stream);
}

void launch_sparsify(float* x, int64_t count, float threshold, bool gate, FfnActivation act,
                     uint64_t* kept, uint8_t* mask, cudaStream_t stream) {
  if (count == 0) return;
  STRATA_LAUNCH(sparsify_kernel, blocks_for(count, kThreads), kThreads, stream, x, count,
                threshold, gate, act, reinterpret_cast<unsigned long long*>(kept), mask);
  check_launch("sparsify", stream);
}

void launch_keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride, int64_t begin,
                        int64_t end, uint64_t* nonzero, cudaStream_t stream) {
  const int64_t width = end - begin;
  if (width <= 0 || n == 0) return;
  STRATA_LAUNCH(keep_needed_kernel, blocks_for(n * width, kThreads), kThreads, stream, h, need, n,
                stride, begin, width, reinterpret_cast<unsigned long long*>(nonzero));
  check_launch("keep_needed", stream);
}

}  // namespace strata::STRATA_CUDA_NS
