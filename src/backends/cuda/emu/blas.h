// The emulated cuBLAS: the calls cuda_backend.cpp makes, with cuBLAS's names and signatures in
// namespace strata::cuda_emu. A GEMM runs on the handle's stream in order with its kernels, as
// a plain loop: each output is the sum over k in ascending order, in f32, of the inputs as the
// real call receives them (f16 operands widened exactly, f32 as they are), so it differs from
// cuBLAS only in the order of the sum.
#pragma once

#include "backends/cuda/emu/runtime.h"

namespace strata::cuda_emu {

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct EmuBlas;
using cublasHandle_t = EmuBlas*;

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes);
// C = alpha op(A) op(B) + beta C, column-major (alpha and beta read from the host when called).
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                              int m, int n, int k, const float* alpha, const float* a, int lda,
                              const float* b, int ldb, const float* beta, float* c, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b,
                            int m, int n, int k, const void* alpha, const void* a,
                            cudaDataType a_type, int lda, const void* b, cudaDataType b_type,
                            int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

}  // namespace strata::cuda_emu
