#include "backends/cuda/emu/blas.h"

#include "tensor/half.h"

namespace strata::cuda_emu {

struct EmuBlas {
  cudaStream_t stream = nullptr;
};

namespace {

float element(const void* p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_16F:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case CUDA_R_16BF:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

bool known(cudaDataType t) {
  return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

// Queues C = alpha op(A) op(B) + beta C with f32 sums.
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n,
                    int k, float alpha, const void* a, cudaDataType at, int lda, const void* b,
                    cudaDataType bt, int ldb, float beta, float* c, int ldc) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || ldc < std::max(1, m) ||
      lda < std::max(1, op_a == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, op_b == CUBLAS_OP_N ? k : n))
    return CUBLAS_STATUS_INVALID_VALUE;
  enqueue_host(h->stream, [=] {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float s = 0.0f;
        for (int l = 0; l < k; ++l) {
          const int64_t ai = op_a == CUBLAS_OP_N ? i + int64_t{l} * lda : l + int64_t{i} * lda;
          const int64_t bi = op_b == CUBLAS_OP_N ? l + int64_t{j} * ldb : j + int64_t{l} * ldb;
          s += element(a, at, ai) * element(b, bt, bi);
        }
        float& out = c[i + int64_t{j} * ldc];
        out = beta == 0.0f ? alpha * s : alpha * s + beta * out;
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new EmuBlas;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void*, size_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                              int m, int n, int k, const float* alpha, const float* a, int lda,
                              const float* b, int ldb, const float* beta, float* c, int ldc) {
  return gemm(handle, op_a, op_b, m, n, k, *alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, *beta, c,
              ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                            int m, int n, int k, const void* alpha, const void* a,
                            cudaDataType a_type, int lda, const void* b, cudaDataType b_type,
                            int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (compute != CUBLAS_COMPUTE_32F || c_type != CUDA_R_32F || !known(a_type) || !known(b_type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return gemm(handle, op_a, op_b, m, n, k, *static_cast<const float*>(alpha), a, a_type, lda, b,
              b_type, ldb, *static_cast<const float*>(beta), static_cast<float*>(c), ldc);
}

}  // namespace strata::cuda_emu
