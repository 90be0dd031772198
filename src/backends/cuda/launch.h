// The CUDA kernels' launchers: plain C++ signatures over device pointers, queued on a stream,
// for the backend (cuda_backend.cpp) to call. Every kernel computes each output element with
// one thread or one warp in a fixed order (block_math.h): no floating-point atomics, so the
// same inputs give the same bits on every run. Only integer counters use atomics.
//
// Built twice from the same sources (cuda_api.h): by nvcc for the GPU (namespace strata::cuda)
// and as C++ for the emulator (strata::cuda_emu), where they run on the CPU in every test job.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_api.h"
#include "tensor/dtype.h"
#include "tensor/ffn_activation.h"

namespace strata::STRATA_CUDA_NS {

// Throws strata::Error (the kernels' files do not include fmt): a failed launch or a shape the
// kernels do not take.
[[noreturn]] void kernel_failure(const std::string& message);
// kernel_failure naming `what` when the last launch failed. With STRATA_CUDA_SYNC=1 in the
// environment it also waits for the kernel, so a fault inside it is named here, by the op that
// launched it, instead of by a later call (a debugging mode: it serialises host and device).
void check_launch(const char* what, cudaStream_t stream);

// A weight matrix in device memory, in the file's rows, or (`column_groups`, the axpy only) a
// column-group copy of one (tensor/column_groups.h: rows are inputs, cols outputs).
struct Rows {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  uint64_t row_bytes = 0;
  bool column_groups = false;
};

inline constexpr int kTile = 8;                 // tokens one pass of a product kernel computes
inline constexpr int kMaxPlaces = 64;           // tokens one rope/attention launch places
inline constexpr int64_t kBucket = 256;         // the axpy's neuron-id buckets (sparse_ops.h)
inline constexpr uint64_t kAxpyReserved = 256;  // the end of the axpy's scratch: its run split

// Where tokens sit in the KV cache, passed by value with the launch.
struct Places {
  int64_t pos[kMaxPlaces];
  int64_t base[kMaxPlaces];
};

// y[b * y_stride + k] = W.row(ids ? ids[k] : k) . x[b] for k < count and tokens b < n;
// with `need` ([n][need_stride] by k) unneeded products are written as 0.
void launch_products(const Rows& w, const int32_t* ids, int64_t count, const float* x, int64_t n,
                     const uint8_t* need, int64_t need_stride, float* y, int64_t y_stride,
                     cudaStream_t stream);
// out[b] = sum over k of c[b * c_stride + k] * wt.row(rows[k]) (c == 0 skipped; a column-group
// copy's row: its input's weights, block_math.h's axpy_weight), summed per
// bucket of kBucket neuron ids (neurons[k]; null: the rows are the ids) in list order, the
// buckets' partials in bucket order. The ids are ascending or two ascending runs (a neuron
// cache's passes; more is a contract violation and traps). `id_bound`: the ids are below it.
// An empty list writes zeros. `partial`: scratch of partial_bytes (its last kAxpyReserved bytes
// the kernels' own); tokens go in passes that fit.
void launch_axpy(const Rows& wt, const int32_t* rows, const int32_t* neurons, int64_t id_bound,
                 int64_t count, const float* c, int64_t c_stride, int64_t n, float* out,
                 int64_t out_stride, float* partial, uint64_t partial_bytes, cudaStream_t stream);
// Rows [row0, row0 + rows) of w as f16 ([rows][cols]), for a tensor-core GEMM.
void launch_rows_to_half(const Rows& w, int64_t row0, int64_t rows, uint16_t* out,
                         cudaStream_t stream);
// Each of n rows of dim activations as f16, divided by its own power of two
// (cuda_math::half_input_scale, written to scales[row]) so that none overflows.
void launch_rows_to_scaled_half(const float* x, int64_t n, int64_t dim, uint16_t* out,
                                float* scales, cudaStream_t stream);
// y[b * y_stride + r] *= scales[b] for b < n, r < rows: a GEMM's products scaled back.
void launch_scale_rows(float* y, int64_t n, int64_t rows, int64_t y_stride, const float* scales,
                       cudaStream_t stream);

void launch_rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim,
                     float eps, cudaStream_t stream);
void launch_layer_norm(const float* x, const float* weight, const float* bias, float* out,
                       int64_t n, int64_t dim, float eps, cudaStream_t stream);
void launch_add_bias(float* x, const float* bias, int64_t n, int64_t dim, cudaStream_t stream);
void launch_add_bias_of(float* y, const float* bias, const int32_t* ids, int64_t count, int64_t n,
                        int64_t stride, cudaStream_t stream);
// n <= kMaxPlaces tokens; `neox`: NeoX's pairs (i, i + half), else adjacent ones.
// q, k, v rows are the heads' widths (n_head or n_head_kv times head_dim); the caches' rows
// are kv_dim wide, of F32, F16, Q8_0 or Q4_0 values (blocks quantized as the CPU's).
void launch_rope_store(float* q, float* k, const float* v, int64_t n, int n_head, int n_head_kv,
                       int head_dim, const float* cos, const float* sin, int half, bool neox,
                       void* k_cache, void* v_cache, DType k_type, DType v_type, int64_t kv_dim,
                       const Places& at, cudaStream_t stream);
// Scores: cuda_math::attention_score (times scale, soft-capped when softcap > 0); `sinks`: one
// logit per query head in the denominators (null: none).
void launch_attention(const float* q, int64_t n, int n_head, int n_head_kv, int head_dim,
                      float scale, float softcap, const float* sinks, const void* k_cache,
                      const void* v_cache,
                      DType k_type, DType v_type, int64_t kv_dim, const Places& at, int64_t n_ctx,
                      float* scores, float* out, cudaStream_t stream);

void launch_activation(FfnActivation act, const float* gate, const float* up, float* h,
                       int64_t count, cudaStream_t stream);
void launch_relu(float* x, int64_t count, cudaStream_t stream);
void launch_threshold(const float* scores, float threshold, bool strict, uint8_t* mask,
                      int64_t count, cudaStream_t stream);
void launch_add(float* x, const float* y, int64_t count, cudaStream_t stream);
void launch_scale(float* x, float factor, int64_t count, cudaStream_t stream);
void launch_mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                          int64_t expert_ff, int64_t n_expert, cudaStream_t stream);
void launch_scale_by_expert(float* h, const int32_t* ids, int64_t count, const float* weights,
                            int64_t n, int64_t stride, int64_t expert_ff, int64_t n_expert,
                            cudaStream_t stream);
void launch_mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                        float* out, cudaStream_t stream);
// counts[0] = number of ids, counts[1] += selected (token, neuron) pairs.
void launch_select_union(const uint8_t* mask, int64_t n, int64_t ff, int32_t* ids, uint8_t* need,
                         int64_t* counts, cudaStream_t stream);
void launch_select_columns(const float* full, const int32_t* ids, int64_t count, int64_t n,
                           int64_t stride, float* out, cudaStream_t stream);
// out[i] = the sum of the float4s thread i reads (a grid-stride pass over p): memory read
// bandwidth as a kernel sees it, nothing written but one value per thread.
void launch_read(const float* p, int64_t count, float* out, int blocks, int threads,
                 cudaStream_t stream);
// TEAL's (or with `gate`, CATS's: act the FFN's) input sparsity over count values, in place,
// the non-zero values left added to *kept; mask (or null): 1 where a value is left non-zero.
void launch_sparsify(float* x, int64_t count, float threshold, bool gate, FfnActivation act,
                     uint64_t* kept, uint8_t* mask, cudaStream_t stream);
void launch_keep_needed(float* h, const uint8_t* need, int64_t n, int64_t stride, int64_t begin,
                        int64_t end, uint64_t* nonzero, cudaStream_t stream);

}  // namespace strata::STRATA_CUDA_NS
