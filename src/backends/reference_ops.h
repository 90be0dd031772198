// The scalar reference of every backend op (backend.h), written for clarity, not speed: weights
// dequantized to f32 row by row, sums in double, no vector code. tests/test_backend_ops.cpp runs
// each op of each backend against these (llama.cpp's test-backend-ops idea), so a new backend
// (CUDA) plugs into the same checks. Host memory only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"

namespace strata::reference {

// Row r of w as f32 (either layout).
std::vector<float> weight_row(const MatrixView& w, int64_t r);

void rms_norm(const float* x, const float* weight, float* out, int64_t n, int64_t dim, float eps);
void layer_norm(const float* x, const float* weight, const float* bias, float* out, int64_t n,
                int64_t dim, float eps);
void add_bias_of(float* y, const float* bias, std::span<const int32_t> ids, int64_t n,
                 int64_t stride);
// y[b * y_stride + r] = w.row(r) . x[b * dim ...] for every row, or the listed rows.
void matmul(const MatrixView& w, const float* x, int64_t n, float* y, int64_t y_stride);
void gather(const MatrixView& w, std::span<const int32_t> rows, const float* x, int64_t n,
            const uint8_t* need, int64_t need_stride, float* y, int64_t y_stride);
void axpy(const MatrixView& wt, std::span<const int32_t> rows, const float* c, int64_t c_stride,
          int64_t n, float* out, int64_t out_stride);
void rope_and_store(float* q, float* k, const float* v, int64_t n, const HeadShape& s,
                    const RopeTable& rope, const KvLayer& kv, const TokenPlaces& at);
// Scores in double: q . k * rule.scale, soft-capped with tanh when rule.softcap > 0.
void attention(const float* q, int64_t n, const HeadShape& s, const ScoreRule& rule,
               const KvLayer& kv, const TokenPlaces& at, float* out);
void activation(FfnActivation act, const float* gate, const float* up, float* h, int64_t count);
// TEAL and CATS (tensor/input_sparsity.h), written out: returns the values left non-zero.
uint64_t sparsify(float* x, int64_t count, float threshold);
uint64_t sparsify_gate(FfnActivation act, float* gate, int64_t count, float threshold);
void mask_unchosen(uint8_t* mask, const float* weights, int64_t n, int64_t stride,
                   int64_t expert_ff, int64_t n_expert);
void scale_by_expert(float* h, std::span<const int32_t> ids, const float* weights, int64_t n,
                     int64_t stride, int64_t expert_ff, int64_t n_expert);
void mix_experts(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                 float* out);

}  // namespace strata::reference
